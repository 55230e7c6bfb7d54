"""The simulation: the run session, the tick scheduler, forks, the direct baseline and resume."""
