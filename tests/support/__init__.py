"""What tests share: drivers, runners, recorders and servers (no test imports another test)."""
