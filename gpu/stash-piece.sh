#!/bin/bash
# Device, one call per piece (carry [".carry/pNN"]): move piece NN out of the per-call working tree into
# /tmp/payload, which lives as long as the machine stays warm.
n=${1:?piece number, e.g. 03}
mkdir -p /tmp/payload && mv .carry/p"$n"/* /tmp/payload/ && ls /tmp/payload | tr '\n' ' ' && du -sh /tmp/payload
