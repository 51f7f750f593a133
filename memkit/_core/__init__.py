"""The ground floor: the models (memories, records, recalls, marks, runs, usage, the graph), errors,
limits and argument checks, filter conditions, and the port with its capability protocols. It imports
nothing of memkit outside itself; every other package builds on it."""
