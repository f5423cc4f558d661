#pragma once
// Reading a model architecture: a Hugging Face config.json as it is (model types gpt2, llama,
// mistral, mixtral, qwen2, qwen2_moe, deepseek_v2/v3), the plain GPT form of DESIGN.md
// ({hidden, layers, heads, vocab, max_positions}, FFN 4·hidden, GELU), or a bare parameter
// count ({params}).
#include <string>

#include "core/json_reader.hpp"
#include "model/model_spec.hpp"

namespace meshsim {

ModelSpec read_model(const JsonRef& root);
ModelSpec load_model(const std::string& path);

}  // namespace meshsim
