"""Cognitive stage processors (seed 004): stateless, input a TaskContext, output the
stage's result.  Pure: no Thespian, no actors (a test keeps it so)."""
