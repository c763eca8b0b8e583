// Everything a topic header and a variant file need from the lab library.
#pragma once

#include "lab/check.hpp"
#include "lab/memory.hpp"
#include "lab/registry.hpp"
#include "lab/rng.hpp"
#include "lab/verify.hpp"
