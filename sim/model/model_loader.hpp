#pragma once
// Reading a model architecture: a Hugging Face config.json as it is (model types gpt2, llama,
// mistral, qwen2, qwen3, phi3, gemma2, gemma3 (its text_config), gemma3_text, mixtral,
// qwen2_moe, qwen3_moe, deepseek_v2/v3, gpt_oss), the plain GPT form of DESIGN.md
// ({hidden, layers, heads, vocab, max_positions}, FFN 4·hidden, GELU), or a bare parameter
// count ({params}).
#include <string>

#include "core/json_reader.hpp"
#include "model/model_spec.hpp"

namespace meshsim {

ModelSpec read_model(const JsonRef& root);
ModelSpec load_model(const std::string& path);

}  // namespace meshsim
