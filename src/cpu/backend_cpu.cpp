// src/cpu/backend_cpu.cpp — the CPU kernel table: every slot of src/backend/slots.def.
#include "cpu/kernels.hpp"

#define EMBER_BACKEND cpu
#include "backend/table.inc"
