// Everything a topic header and a variant file need from the lab library.
#pragma once

#include "lab/check.hpp"
#include "lab/graph.hpp"
#include "lab/memory.hpp"
#include "lab/profiler.hpp"
#include "lab/registry.hpp"
#include "lab/rng.hpp"
#include "lab/timing.hpp"
#include "lab/verify.hpp"
