"""The version of worldsim: one place, read by the build and recorded in every trace."""

__version__ = "0.2.0"
