// dccl-info --job ADDR: the live view of a running job, from the status records
// its ranks publish to the store (src/comm/status.hpp).
#pragma once

int job_view(int argc, char** argv);
