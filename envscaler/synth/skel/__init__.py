"""SkelBuilder: task descriptions -> topics -> environment classes -> quality-gated skeletons."""
