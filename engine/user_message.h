// Error and warning text as a user reads it: source locations are for developers.
#pragma once

#include <string>

namespace tandem {

// `text` without the source locations errors carry (" at cuda/conv.cu:212"), unless the log
// level is debug or finer (--log-level debug), where they help find the place.
std::string user_message(const std::string& text);

}  // namespace tandem
