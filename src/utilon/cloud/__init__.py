"""Cura's world: servers hosting VM pools, moldable MapReduce jobs, profiles, the simulator."""
