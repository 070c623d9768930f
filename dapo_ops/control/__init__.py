"""Operator side: inventory, remote execution, settings, planning, launch, status. Returns values or raises typed errors; never prints or exits."""
