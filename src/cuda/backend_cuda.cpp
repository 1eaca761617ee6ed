// src/cuda/backend_cuda.cpp — the CUDA kernel table: every slot of src/backend/slots.def.
#include "cuda/kernels.cuh"

#define EMBER_BACKEND cuda
#include "backend/table.inc"
