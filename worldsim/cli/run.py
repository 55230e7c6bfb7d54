"""``worldsim run``: placeholder replaced by the engine's command module."""
