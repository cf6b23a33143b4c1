// dccl-info --plan [--json] [--ranks N] [--hosts H] [--provider P] [--cores C]:
// prints the tuning plan; returns the exit status (0, 1 for invalid settings, 2 for a bad option).
#pragma once

int print_plan(int argc, char** argv);
