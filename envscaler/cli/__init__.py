"""The `envscaler` command line, the operator's tool: it serves, checks, synthesizes, gates and
imports environments, runs rollouts and benchmarks. It is installed with the project (``pip install
.``), never with the client (``pip install ./clients``), since it imports the service's packages."""
