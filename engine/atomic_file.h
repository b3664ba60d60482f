// Replacing a file whole, for every file tandem writes in one piece: checkpoints, ONNX models,
// plots, the start of a metrics file, exported images. A reader, a crash, a full disk or another
// run writing the same folder then meets the old file or the new one, never a part of either.
#pragma once

#include <cstddef>
#include <cstdio>
#include <functional>
#include <string>

namespace tandem {

// Writes `path` through `write`, which fills the open temporary file and returns false when a
// write failed. The temporary lies beside `path` under a name of this process's own,
// ".NAME.tmp.HOST.PID.XXXXXX" (created exclusively, so two runs never share one, and readable as
// any new file: 0666 less the umask); it is flushed and synced, renamed over `path`, and the
// folder synced so that the new name survives a power cut. Whatever fails, the temporary is
// removed and `path` is left as it was. Temporaries that dead writers on this host left in the
// folder are removed first. Returns "" or what failed, with the system's reason
// ("writing failed (No space left on device)"), for the caller's own error.
//
// synced false, for a writer of many files into a folder of its own (exported images): neither
// the file nor the folder is synced, and the folder is not searched for dead writers'
// temporaries each time (remove_stale_temporaries, once, is the caller's). A crash of the process
// still leaves no part of a file under its name; a power cut may.
std::string replace_file(const std::string& path, const std::function<bool(FILE*)>& write,
                         bool synced = true);

// The same for a file whose whole contents are at hand.
std::string replace_file_with(const std::string& path, const std::string& contents,
                              bool synced = true);

// The same for a writer that opens its own file by name (PLplot): `produce(tmp)` writes the
// temporary's path and returns false when it failed; an empty file counts as a failure.
std::string replace_file_by_name(const std::string& path,
                                 const std::function<bool(const std::string& tmp)>& produce);

// Removes the temporary files that writers on this host left in `folder` when they died (a crash,
// SIGKILL) before renaming them into place; those of live processes, and of other hosts sharing
// the folder, are left alone. Returns how many went.
size_t remove_stale_temporaries(const std::string& folder);

}  // namespace tandem
