"""SimPy processes: the step-level micro simulation and the run-level macro simulation."""
