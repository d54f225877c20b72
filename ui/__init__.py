"""PySide6 widgets: they render engine events and forward user intent; no engine logic here."""
