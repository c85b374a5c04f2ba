"""The environment format: manifest and scenario models, catalogue loader, tool schemas from source."""
