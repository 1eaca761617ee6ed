// src/cpu/backend_cpu.cpp — the CPU kernel table (every slot of src/backend/slots.def) and
// device runtime (every slot of src/backend/runtime_slots.def).
#include "cpu/kernels.hpp"

#define EMBER_BACKEND cpu
#include "backend/table.inc"
