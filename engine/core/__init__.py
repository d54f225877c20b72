"""Sans-I/O core: no threads, sockets, sleeps or wall clocks. Pure functions and state machines."""
