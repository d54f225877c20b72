"""Composition root: CLI and GUI entry points, settings, hotkeys, text injection, wiring."""
