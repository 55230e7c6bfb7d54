"""Roles: the one registry of agent kinds — prompt roles from ``agents/`` and Python roles."""
