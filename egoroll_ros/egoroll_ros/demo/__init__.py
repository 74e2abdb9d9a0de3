"""`egoroll demo`: the whole graph on the simulated robot with the shipped demo policy."""
