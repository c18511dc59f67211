// Internal: the pieces every family file shares, by concern: hook recording (hook_recorder.hpp),
// masks, RoPE and the eager attention core (attention_core.hpp), input checks, pipeline stages and
// the decoders' frame (forward_frame.hpp), weight loading (weight_loader.hpp) and the building
// blocks (blocks.hpp), so that each family file only says what differs.
#pragma once

#include "attention_core.hpp"
#include "blocks.hpp"
#include "forward_frame.hpp"
#include "hook_recorder.hpp"
#include "weight_loader.hpp"
