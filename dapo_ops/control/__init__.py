"""Operator side: inventory, remote execution, settings, planning, launch, status.

Returns values or raises typed errors and never exits; the few modules that write to a terminal (a plan's and a
fan-out table's rendering, the SwanLab prompt, ``python -m`` programs) are named in docs/design.md "Layout".
"""
