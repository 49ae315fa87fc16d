// pch.hpp: the precompiled header of LibTorch-using targets (compile time on 2 cores).
#pragma once
#include <torch/torch.h>
