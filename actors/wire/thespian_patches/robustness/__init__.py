"""Robustness patches: without one, Pegasus is wrong (a dead admin, a dead member never noticed, a
stalled send).  One that cannot apply refuses the start, as a security patch does.
"""
