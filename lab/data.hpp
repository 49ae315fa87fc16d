// data.hpp: token data for training, in four rooms (lab/data/): the token file format (token_file.hpp), text to
// tokens (corpus.hpp), where sequences come from (sources.hpp), and the sampler that hands each data-parallel rank
// disjoint, deterministic, resumable batches (sampler.hpp). Include the one you need; this header includes them all.
#pragma once

#include "lab/data/corpus.hpp"
#include "lab/data/sampler.hpp"
#include "lab/data/sources.hpp"
#include "lab/data/token_file.hpp"
