// The trainer's help text, kept as one table that trainer --help and trainer COMMAND --help share.
#include "tools/help.h"

#include <algorithm>
#include <vector>

namespace tandem {

namespace {

struct Flag {
  std::string name;  // with its value, as printed: "--epochs N"
  std::string text;  // what it does; a '\n' continues it on the next line, under the first
  // The list of trainer --help that shows it ("flags", "bench"), or "": its commands' help only.
  std::string list;
  std::vector<std::string> commands;  // whose help lists it
};

const std::vector<std::string> kEvery = {"train",   "bench",         "devices", "eval",
                                         "predict", "export-images", "export"};

const std::vector<Flag> kFlags = {
    {"--checkpoint FILE|DIR",
     "the checkpoint file, or a folder: its newest",
     "",
     {"eval", "predict", "export"}},
    {"--config FILE",
     "the model, data and training settings (YAML), e.g. configs/lenet.yaml",
     "",
     {"train", "bench", "export-images"}},
    {"--config FILE",
     "build the model from FILE (default: the config stored in the checkpoint)",
     "",
     {"eval", "predict", "export"}},
    {"--device LIST", "where to run: see devices below (default: cpu)", "", {"train", "bench"}},
    {"--device D",
     "the device to run on: cpu, cpu:THREADS, gpu, gpu:INDEX or auto (default: cpu)",
     "",
     {"eval", "predict"}},
    {"--top-k K",
     "the classes printed for each image, most probable first (default: 3)",
     "",
     {"predict"}},
    {"--out DIR",
     "a new or empty folder; writes DIR/train/CLASS/*.png and DIR/test/CLASS/*.png",
     "",
     {"export-images"}},
    {"--limit-per-class N[,TEST_N]",
     "at most N images per class, TEST_N of the test split (default: N);\n0: every image",
     "",
     {"export-images"}},
    {"--onnx FILE", "the ONNX file to write, e.g. lenet.onnx", "", {"export"}},
    {"--opset N", "the ONNX opset, 13 to 17 (default: 13)", "", {"export"}},
    {"--softmax",
     "output class probabilities (\"probabilities\") instead of logits (\"logits\")",
     "",
     {"export"}},
    {"--fold-normalization",
     "normalize in the graph: it takes pixels in [0,1] (default: the input\nis normalized "
     "with data.normalize's mean and std, as in training)",
     "",
     {"export"}},
    {"--force", "overwrite FILE when it exists", "", {"export"}},
    {"--epochs N", "epochs to train", "flags", {"train"}},
    {"--batch-size N", "samples per step", "flags", {"train", "bench", "eval"}},
    {"--lr X", "learning rate", "flags", {"train"}},
    {"--seed N", "seed of the weights, shuffling and dropout", "flags", {"train"}},
    {"--threads N",
     "CPU threads (default: every core)",
     "flags",
     {"train", "bench", "eval", "predict"}},
    {"--data DIR",
     "data folder (replaces data.path)",
     "flags",
     {"train", "bench", "eval", "export-images"}},
    {"--metrics FILE",
     "per-epoch metrics of every device, JSON lines (or CSV when FILE ends in .csv)",
     "flags",
     {"train"}},
    {"--plot FILE.png",
     "loss, accuracy and images/s per epoch, one colour per device; redrawn\nafter every epoch",
     "flags",
     {"train"}},
    {"--log-every N",
     "every N steps, the mean loss, accuracy, learning rate and images/s of\nthose steps to the "
     "metrics file, the plot and TensorBoard",
     "flags",
     {"train"}},
    {"--tensorboard DIR",
     "TensorBoard event files, a run folder per device (DIR/cpu, DIR/gpu)",
     "flags",
     {"train"}},
    {"--precision LIST",
     "fp32, tf32 (GPU), bf16 (GPU, CPUs with AVX512-BF16) or fp16 (GPU,\n"
     "with a dynamic loss scale, shown as 'scale' while it trains)\n"
     "(replaces the config's precision); a list runs each side by side on\n"
     "the one device (cpu with fp32,bf16), or pairs with a list of devices",
     "flags",
     {"train", "bench"}},
    {"--precision P",
     "fp32, tf32, bf16 or fp16 (default: the config's); the checkpoint's\n"
     "fp32 weights run in any of them",
     "",
     {"eval", "predict"}},
    {"--log-placement",
     "which library primitive or algorithm ran each layer",
     "flags",
     {"train", "bench"}},
    {"--checkpoint-dir DIR",
     "write DIR/epoch-E.safetensors (replaces train.checkpoint.dir; every\n"
     "train.checkpoint.every epochs, the newest train.checkpoint.keep kept)",
     "flags",
     {"train"}},
    {"--resume PATH",
     "continue from a checkpoint file, or the newest in folder PATH; --epochs\nstays the total",
     "flags",
     {"train"}},
    {"--quiet", "no start-up table and no progress bar", "flags", {"train", "bench"}},
    {"--verbose N",
     "0: the result only (as --quiet); 1: the progress bar (default); 2: one\nline per epoch",
     "flags",
     {"train"}},
    {"--quiet", "only the heading and the loss and accuracy line", "", {"eval"}},
    {"--log-level L", "trace, debug, info, warn (default), error, off", "flags", kEvery},
    {"--batch-sizes LIST",
     "e.g. 16,64,256 (default: the config's batch size or --batch-size)",
     "bench",
     {"bench"}},
    {"--per-layer",
     "forward and backward time, FLOPs and GFLOP/s of each layer",
     "bench",
     {"bench"}},
    {"--plot FILE.png", "throughput and speedup against batch size", "bench", {"bench"}},
    {"--json", "one JSON object per device and batch size", "bench", {"bench"}},
    {"--steps N", "steps measured, of which the median counts (default: 20)", "", {"bench"}},
    {"--warmup N", "steps run before them and not counted (default: 5)", "", {"bench"}},
};

const std::string kDevices =
    R"(devices: cpu, cpu:THREADS, gpu, gpu:INDEX, or a comma-separated list of them; auto: the GPU
  when it can run here, else the CPU (one line says why); all: the CPU, then each GPU when the
  GPU backend can run here (else one line says why)
  (--device cpu,gpu trains the same config from the same seed on each in turn, then prints one
  side-by-side table: time, images/s, loss, accuracy, peak memory, speedup, parity verdict;
  --precision fp32,bf16 does the same for precisions, the parity tolerance then that of the
  16-bit run: 5e-2 relative for bf16, 1e-2 for fp16, 1e-3 between fp32 runs)
)";

const std::string kDataParallel =
    R"(several processes: mpirun -np N trainer --config FILE ... trains one run over N processes
  (hosts and GPUs as mpirun places them), each a batch of every step; gradients are averaged
  before each update, and process 0 prints and writes the files
)";

const std::string kSignals =
    R"(Ctrl-C (SIGINT) or SIGTERM: the current step finishes, a checkpoint is written (to the
checkpoint folder, or runs/<config name>/), and the command that continues the run (its flags,
--resume CHECKPOINT) printed; signals within a second of the first count as it (GNU timeout
sends two); a later one exits at once, after any checkpoint being written is complete.
)";

const std::string kExitStatus =
    R"(exit status: 0 done; 2 bad command line; 3 bad config; 4 bad data; 5 device unusable;
6 loss became NaN/Inf; 7 checkpoint unreadable or mismatched;
8 a device of a list could not run (the others did; see its row); 70 internal error;
130 stopped by SIGINT, 143 by SIGTERM (after writing the checkpoint).
)";

const std::string kOnnxExport =
    R"(the ONNX file: IR version 8, a dynamic batch dimension; input "input" of the model's input
  shape, output "logits" (or "probabilities") of its classes; metadata class_names,
  normalize_mean, normalize_std and normalization (before_input or in_graph). Every layer type
  is written as the ONNX operators that compute the same; the ONNX checker reads the file first.
)";

struct Command {
  std::string name;
  std::string usage;                      // its lines under "usage:" in trainer --help
  std::string about;                      // its paragraph of trainer --help, or ""
  std::vector<const std::string*> notes;  // paragraphs its own help adds after its flags
  std::string example;
};

const std::vector<Command> kCommands = {
    {"train",
     "  trainer --config FILE [--device LIST] [flags]        train and evaluate\n",
     "",
     {&kDevices, &kDataParallel, &kSignals},
     "trainer --config configs/lenet.yaml --device cpu,gpu --epochs 2"},
    {"bench",
     "  trainer bench --config FILE [--device LIST] [--batch-sizes LIST] [bench flags]\n",
     R"(bench: throughput of training steps (forward, backward, update) and of inference on random
data, median of --steps steps (20) after --warmup steps (5) that are not counted, for each
device and batch size, with the speedup against the first device.
)",
     {&kDevices},
     "trainer bench --config configs/cifar_cnn.yaml --device cpu,gpu --batch-sizes 16,64,256"},
    {"devices",
     "  trainer devices                                      what this machine has\n",
     "",
     {},
     "trainer devices"},
    {"export-images",
     "  trainer export-images --config FILE --out DIR [--limit-per-class N[,TEST_N]]\n"
     "                                                       write the data set as PNG image "
     "folders\n",
     "",
     {},
     "trainer export-images --config configs/lenet.yaml --out my-images --limit-per-class 30,10"},
    {"eval",
     "  trainer eval --checkpoint FILE|DIR [--config FILE] [--data DIR] [--device D]\n"
     "                                                       test loss, accuracy, per class, "
     "confusion matrix\n",
     "",
     {},
     "trainer eval --checkpoint runs/lenet --device gpu"},
    {"predict",
     "  trainer predict --checkpoint FILE|DIR [--top-k K] IMAGE|FOLDER...   top classes with "
     "probabilities\n                                  (a folder: each image file directly in "
     "it)\n",
     "",
     {},
     "trainer predict --checkpoint runs/lenet --top-k 3 digit.png"},
    {"export",
     "  trainer export --checkpoint FILE|DIR --onnx FILE [--opset N] [--softmax]\n"
     "                 [--fold-normalization] [--force]      write the model as ONNX\n",
     "",
     {&kOnnxExport},
     "trainer export --checkpoint runs/lenet --onnx lenet.onnx --fold-normalization"},
};

// One flag a line, its text from column `width` + 2 on (two spaces after a longer name), the
// text's further lines from column 21.
std::string flag_rows(const std::vector<const Flag*>& flags, size_t width = 19) {
  std::string out;
  for (const Flag* f : flags) {
    out +=
        "  " + f->name + std::string(f->name.size() + 2 > width ? 2 : width - f->name.size(), ' ');
    for (char ch : f->text) {
      out += ch;
      if (ch == '\n') out.append(21, ' ');
    }
    out += "\n";
  }
  return out;
}

std::vector<const Flag*> flags_of_list(const std::string& list) {
  std::vector<const Flag*> out;
  for (const Flag& f : kFlags)
    if (f.list == list) out.push_back(&f);
  return out;
}

}  // namespace

std::string general_help() {
  std::string s =
      "tandem trainer: train a YAML-described CNN on the CPU or an NVIDIA GPU.\n\nusage:\n";
  for (const Command& c : kCommands) s += c.usage;
  s += "  trainer help [COMMAND] | --help | --version\n\n" + kDevices +
       "\nflags (override the config):\n" + flag_rows(flags_of_list("flags")) + "\n";
  for (const Command& c : kCommands)
    if (c.name == "bench") s += c.about + flag_rows(flags_of_list("bench"), 20) + "\n";
  return s + kDataParallel + "\n" + kSignals + "\n" + kExitStatus;
}

std::vector<std::string> command_names() {
  std::vector<std::string> out;
  for (const Command& c : kCommands) out.push_back(c.name);
  return out;
}

std::string command_help(const std::string& command) {
  const auto c = std::find_if(kCommands.begin(), kCommands.end(),
                              [&](const Command& k) { return k.name == command; });
  if (c == kCommands.end()) return general_help();
  std::string s = "usage:\n" + c->usage;
  if (!c->about.empty()) s += "\n" + c->about;
  std::vector<const Flag*> flags;
  for (const Flag& f : kFlags)
    if (std::find(f.commands.begin(), f.commands.end(), command) != f.commands.end())
      flags.push_back(&f);
  // Aligned as in the general help, where bench's own flags (--batch-sizes LIST) take 20.
  s += "\nflags:\n" + flag_rows(flags, command == "bench" ? 20 : 19);
  for (const std::string* note : c->notes) s += "\n" + *note;
  return s + "\nexample:\n  " + c->example + "\n";
}

std::vector<std::string> commands_of_flag(const std::string& flag) {
  std::vector<std::string> out;
  for (const Command& c : kCommands)
    for (const Flag& f : kFlags)
      if (f.name.substr(0, f.name.find(' ')) == flag &&
          std::find(f.commands.begin(), f.commands.end(), c.name) != f.commands.end()) {
        out.push_back(c.name);
        break;
      }
  return out;
}

std::vector<std::string> flag_names() {
  std::vector<std::string> out;
  for (const Flag& f : kFlags)
    if (const std::string name = f.name.substr(0, f.name.find(' '));
        std::find(out.begin(), out.end(), name) == out.end())
      out.push_back(name);
  return out;
}

bool is_switch(const std::string& flag) {
  if (flag == "--help" || flag == "--version") return true;
  return std::any_of(kFlags.begin(), kFlags.end(), [&](const Flag& f) { return f.name == flag; });
}

}  // namespace tandem
