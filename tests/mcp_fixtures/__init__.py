"""Fixtures for the MCP bridge tests: a registry the server subprocess serves, and helpers."""
