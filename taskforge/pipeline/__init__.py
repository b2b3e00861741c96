"""``generate``: sources -> profiles -> candidates -> validated tasks -> dataset, on an executor."""
