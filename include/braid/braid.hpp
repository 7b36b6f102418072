// The umbrella header: everything in braid that needs no GPU. CUDA parts are
// opt-in: include braid/backend/cuda.hpp or braid/profiler/cupti.hpp on purpose.
#pragma once

#include "braid/config.hpp"
#include "braid/error.hpp"
#include "braid/graph/op.hpp"
#include "braid/graph/op_graph.hpp"
#include "braid/model/device_json.hpp"
#include "braid/model/device_spec.hpp"
#include "braid/model/device_table.hpp"
#include "braid/model/kernel.hpp"
#include "braid/model/occupancy.hpp"
#include "braid/model/sm_resources.hpp"
