// The trainer's flags, kept as one table that trainer --help and trainer COMMAND --help print and
// the command line is parsed by (flag_use): a new flag is one entry here.
#include "tools/help.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <sstream>
#include <vector>

#include "engine/config.h"  // closest_name, did_you_mean
#include "engine/error.h"
#include "engine/text.h"
#include "tools/flag_values.h"

namespace tandem {

namespace {

// How a flag sets the request: `v` is the word after it ("" for a switch), `flag` its name for
// messages.
using Setter = std::function<void(RunRequest& r, const std::string& flag, const std::string& v)>;

template <typename T>
Setter text(T RunRequest::*field) {
  return [field](RunRequest& r, const std::string&, const std::string& v) { r.*field = v; };
}
template <typename T>
Setter whole(T RunRequest::*field) {
  return [field](RunRequest& r, const std::string& flag, const std::string& v) {
    r.*field = parse_int(flag, v);
  };
}
Setter real(std::optional<double> RunRequest::*field) {
  return [field](RunRequest& r, const std::string& flag, const std::string& v) {
    r.*field = parse_double(flag, v);
  };
}
Setter on(bool RunRequest::*field) {
  return [field](RunRequest& r, const std::string&, const std::string&) { r.*field = true; };
}
Setter seed() {
  return [](RunRequest& r, const std::string& flag, const std::string& v) {
    r.seed = parse_seed(flag, v);
  };
}
Setter devices() {
  return [](RunRequest& r, const std::string&, const std::string& v) {
    r.devices = parse_device_list(v);
  };
}
Setter precisions() {
  return [](RunRequest& r, const std::string&, const std::string& v) {
    r.precisions = split(v, ',');
    const std::vector<std::string> known = {"fp32", "tf32", "bf16", "fp16"};
    for (const std::string& p : r.precisions)
      if (std::find(known.begin(), known.end(), p) == known.end())
        throw UsageError(
            "unknown precision '" + p + "'" + did_you_mean(closest_name(p, known)),
            "give fp32, tf32, bf16 or fp16, or a comma list of them such as fp32,bf16");
  };
}
Setter log_every() {
  return [](RunRequest& r, const std::string& flag, const std::string& v) {
    r.log_every = parse_int(flag, v);
    if (r.log_every < 1)
      throw UsageError("--log-every must be at least 1 step", "e.g. --log-every 50");
  };
}
Setter verbose() {
  return [](RunRequest& r, const std::string&, const std::string& v) {
    if (v != "0" && v != "1" && v != "2")
      throw UsageError("--verbose " + v + ": expected 0, 1 or 2",
                       "0: the result only (as --quiet), 1: the progress bar (default), "
                       "2: one line per epoch");
    r.verbose = v[0] - '0';
  };
}
Setter log_level() {
  return [](RunRequest&, const std::string&, const std::string& v) {
    const auto level = spdlog::level::from_str(v);
    if (level == spdlog::level::off && v != "off")
      throw UsageError("unknown log level '" + v + "'",
                       "use trace, debug, info, warn, error or off");
    spdlog::set_level(level);
  };
}
Setter batch_sizes() {  // several --batch-sizes add up
  return [](RunRequest& r, const std::string& flag, const std::string& v) {
    for (const std::string& b : split(v, ',')) r.batch_sizes.push_back(parse_int(flag, b));
  };
}
Setter limits_per_class() {
  return [](RunRequest& r, const std::string& flag, const std::string& v) {
    const std::vector<std::string> n = split(v, ',');
    if (n.size() > 2)
      throw UsageError(flag + " expects N or TRAIN,TEST", "e.g. " + flag + " 30,10");
    r.limit_per_class = parse_int(flag, n[0]);
    r.test_limit_per_class = n.size() == 2 ? parse_int(flag, n[1]) : r.limit_per_class;
  };
}

// One flag as --help prints it and as the command line sets it: the one table of both.
struct Flag {
  std::string name;  // with its value, as printed: "--epochs N"
  std::string text;  // what it does; a '\n' continues it on the next line, under the first
  // The list of trainer --help that shows it ("flags", "bench"), or "": its commands' help only.
  std::string list;
  std::vector<std::string> commands;  // whose help lists it, and which take it
  Setter set;                         // what it does to the request

  std::string word() const { return name.substr(0, name.find(' ')); }  // "--epochs"
  bool takes_value() const { return name.find(' ') != std::string::npos; }
  bool of(const std::string& command) const {
    return std::find(commands.begin(), commands.end(), command) != commands.end();
  }
};

const std::vector<std::string> kEvery = {"train",         "bench",  "devices", "eval",   "predict",
                                         "export-images", "export", "import",  "summary"};

const std::vector<Flag> kFlags = {
    {"--checkpoint FILE|DIR",
     "the checkpoint file, or a folder: its newest",
     "",
     {"eval", "predict", "export"},
     text(&RunRequest::checkpoint)},
    {"--config FILE",
     "the model, data and training settings (YAML), e.g. configs/lenet.yaml",
     "",
     {"train", "bench", "export-images", "summary"},
     text(&RunRequest::config_path)},
    {"--config FILE",
     "build the model from FILE (default: the config stored in the checkpoint)",
     "",
     {"eval", "predict", "export"},
     text(&RunRequest::config_path)},
    {"--device LIST",
     "where to run: see devices below (default: cpu)",
     "",
     {"train", "bench"},
     devices()},
    {"--device D",
     "the device to run on: cpu, cpu:THREADS, gpu, gpu:INDEX or auto (default: cpu)",
     "",
     {"eval", "predict"},
     devices()},
    {"--top-k K",
     "the classes printed for each image, most probable first (default: 3)",
     "",
     {"predict"},
     whole(&RunRequest::top_k)},
    {"--out DIR",
     "a new or empty folder; writes DIR/train/CLASS/*.png and DIR/test/CLASS/*.png",
     "",
     {"export-images"},
     text(&RunRequest::out_dir)},
    {"--limit-per-class N[,TEST_N]",
     "at most N images per class, TEST_N of the test split (default: N);\n0: every image",
     "",
     {"export-images"},
     limits_per_class()},
    {"--onnx FILE",
     "the ONNX file to write, e.g. lenet.onnx",
     "",
     {"export"},
     text(&RunRequest::onnx_path)},
    {"--opset N",
     "the ONNX opset, 13 to 17 (default: 13)",
     "",
     {"export"},
     whole(&RunRequest::opset)},
    {"--softmax",
     "output class probabilities (\"probabilities\") instead of logits (\"logits\")",
     "",
     {"export"},
     on(&RunRequest::softmax)},
    {"--fold-normalization",
     "normalize in the graph: it takes pixels in [0,1] (default: the input\nis normalized "
     "with data.normalize's mean and std, as in training)",
     "",
     {"export"},
     on(&RunRequest::fold_normalization)},
    {"--force", "overwrite FILE when it exists", "", {"export"}, on(&RunRequest::force)},
    {"--out DIR",
     "the folder to write NAME.yaml and NAME.safetensors in (NAME: the\nONNX file's name)",
     "",
     {"import"},
     text(&RunRequest::out_dir)},
    {"--input-shape C,H,W",
     "the input's size where the ONNX file leaves it open, e.g. 3,224,224",
     "",
     {"import"},
     text(&RunRequest::input_shape)},
    {"--normalize N",
     "the normalization the model was trained with: imagenet, or\nMEAN,...:STD,... on pixels "
     "in [0,1] (default: none)",
     "",
     {"import"},
     text(&RunRequest::normalize)},
    {"--force",
     "overwrite NAME.yaml and NAME.safetensors when they exist",
     "",
     {"import"},
     on(&RunRequest::force)},
    {"--epochs N", "epochs to train", "flags", {"train"}, whole(&RunRequest::epochs)},
    {"--batch-size N",
     "samples per step",
     "flags",
     {"train", "bench", "eval", "summary"},
     whole(&RunRequest::batch_size)},
    {"--lr X", "learning rate", "flags", {"train"}, real(&RunRequest::lr)},
    {"--seed N", "seed of the weights, shuffling and dropout", "flags", {"train"}, seed()},
    {"--threads N",
     "CPU threads (default: every core)",
     "flags",
     {"train", "bench", "eval", "predict"},
     whole(&RunRequest::threads)},
    {"--data DIR",
     "data folder (replaces data.path)",
     "flags",
     {"train", "bench", "eval", "export-images"},
     text(&RunRequest::data)},
    {"--metrics FILE",
     "per-epoch metrics of every device, JSON lines (or CSV when FILE ends in .csv)",
     "flags",
     {"train"},
     text(&RunRequest::metrics_path)},
    {"--plot FILE.png",
     "loss, accuracy and images/s per epoch, one colour per device; redrawn\nafter every epoch",
     "flags",
     {"train"},
     text(&RunRequest::plot_path)},
    {"--log-every N",
     "every N steps, the mean loss, accuracy, learning rate and images/s of\nthose steps to the "
     "metrics file, the plot and TensorBoard",
     "flags",
     {"train"},
     log_every()},
    {"--tensorboard DIR",
     "TensorBoard event files, a run folder per device (DIR/cpu, DIR/gpu)",
     "flags",
     {"train"},
     text(&RunRequest::tensorboard)},
    {"--precision LIST",
     "fp32, tf32 (GPU), bf16 (GPU, CPUs with AVX512-BF16) or fp16 (GPU,\n"
     "with a dynamic loss scale, shown as 'scale' while it trains)\n"
     "(replaces the config's precision); a list runs each side by side on\n"
     "the one device (cpu with fp32,bf16), or pairs with a list of devices",
     "flags",
     {"train", "bench"},
     precisions()},
    {"--precision P",
     "fp32, tf32, bf16 or fp16 (default: the config's); the checkpoint's\n"
     "fp32 weights run in any of them",
     "",
     {"eval", "predict"},
     precisions()},
    {"--log-placement",
     "which library primitive or algorithm ran each layer",
     "flags",
     {"train", "bench"},
     on(&RunRequest::log_placement)},
    {"--checkpoint-dir DIR",
     "write DIR/epoch-E.safetensors (replaces train.checkpoint.dir; every\n"
     "train.checkpoint.every epochs, the newest train.checkpoint.keep kept)",
     "flags",
     {"train"},
     text(&RunRequest::checkpoint_dir)},
    {"--init FILE",
     "start a new run from a checkpoint's weights, taken by\nlayer name (replaces train.init; "
     "a head of another\nshape starts from the seed)",
     "flags",
     {"train"},
     text(&RunRequest::init)},
    {"--resume PATH",
     "continue from a checkpoint file, or the newest in folder PATH; --epochs\nstays the total",
     "flags",
     {"train"},
     text(&RunRequest::resume)},
    {"--quiet",
     "no start-up table and no progress bar",
     "flags",
     {"train", "bench"},
     on(&RunRequest::quiet)},
    {"--verbose N",
     "0: the result only (as --quiet); 1: the progress bar (default); 2: one\nline per epoch",
     "flags",
     {"train"},
     verbose()},
    {"--quiet",
     "only the heading and the loss and accuracy line",
     "",
     {"eval"},
     on(&RunRequest::quiet)},
    {"--log-level L", "trace, debug, info, warn (default), error, off", "flags", kEvery,
     log_level()},
    {"--batch-sizes LIST",
     "e.g. 16,64,256 (default: the config's batch size or --batch-size)",
     "bench",
     {"bench"},
     batch_sizes()},
    {"--per-layer",
     "forward and backward time, FLOPs and GFLOP/s of each layer",
     "bench",
     {"bench"},
     on(&RunRequest::per_layer)},
    {"--plot FILE.png",
     "throughput and speedup against batch size",
     "bench",
     {"bench"},
     text(&RunRequest::plot_path)},
    {"--json",
     "one JSON object per device and batch size",
     "bench",
     {"bench"},
     on(&RunRequest::json)},
    {"--json", "the summary as one JSON object", "", {"summary"}, on(&RunRequest::json)},
    {"--json",
     "one JSON object per image: the file, the top classes, every class's\nprobability and "
     "logit (%.9g)",
     "",
     {"predict"},
     on(&RunRequest::json)},
    {"--steps N",
     "steps measured, of which the median counts (default: 20)",
     "",
     {"bench"},
     whole(&RunRequest::steps)},
    {"--warmup N",
     "steps run before them and not counted (default: 5)",
     "",
     {"bench"},
     whole(&RunRequest::warmup)},
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

const std::string kOnnxImport =
    R"(import reads what torch.onnx.export writes for classification CNNs (opsets 13 to 17): Conv,
  Gemm, MatMul with Add, BatchNormalization, Relu, Clip, Sigmoid, HardSigmoid, HardSwish,
  LeakyRelu, Tanh, Elu, Softplus, GELU (Erf form), SiLU (Sigmoid and Mul), Mul, Add, Concat,
  MaxPool, AveragePool, GlobalAveragePool, Flatten, Reshape to (batch, -1), Dropout, Identity
  and a final Softmax (left out). Any other operator: the import names each, and writes nothing.
)";

const std::string kOnnxExport =
    R"(the ONNX file: IR version 8, a dynamic batch dimension; input "input" of the model's input
  shape, output "logits" (or "probabilities") of its classes; metadata class_names,
  normalize_mean, normalize_std and normalization (before_input or in_graph). Every layer type
  is written as the ONNX operators that compute the same; the ONNX checker reads the file first.
)";

struct Command {
  std::string name;
  std::string synopsis;                   // its command line under "usage:" ("trainer devices")
  std::string what;                       // what it does, beside or under the synopsis
  std::string about;                      // its paragraph of trainer --help, or ""
  std::vector<const std::string*> notes;  // paragraphs its own help adds after its flags
  std::string example;
};

const std::vector<Command> kCommands = {
    {"train",
     "trainer --config FILE [--device LIST] [flags]",
     "train and evaluate",
     "",
     {&kDevices, &kDataParallel, &kSignals},
     "trainer --config configs/lenet.yaml --device cpu,gpu --epochs 2"},
    {"bench",
     "trainer bench --config FILE [--device LIST] [--batch-sizes LIST] [bench flags]",
     "throughput of training and inference",
     R"(bench: throughput of training steps (forward, backward, update) and of inference on random
data, median of --steps steps (20) after --warmup steps (5) that are not counted, for each
device and batch size, with the speedup against the first device.
)",
     {&kDevices},
     "trainer bench --config configs/mlp.yaml --device all --batch-sizes 16,64,256"},
    {"devices", "trainer devices", "what this machine has", "", {}, "trainer devices"},
    {"export-images",
     "trainer export-images --config FILE --out DIR [--limit-per-class N[,TEST_N]]",
     "write the data set as PNG image folders",
     "",
     {},
     "trainer export-images --config configs/mlp.yaml --out img --limit-per-class 30"},
    {"eval",
     "trainer eval --checkpoint FILE|DIR [--config FILE] [--data DIR] [--device D]",
     "test loss, accuracy, per class, confusion matrix",
     "",
     {},
     "trainer eval --checkpoint runs/lenet --device gpu"},
    {"predict",
     "trainer predict --checkpoint FILE|DIR [--top-k K] [--json] IMAGE|FOLDER...",
     "top classes with probabilities (a folder: each image file directly in it)",
     "",
     {},
     "trainer predict --checkpoint runs/lenet --top-k 3 digit.png"},
    {"export",
     "trainer export --checkpoint FILE|DIR --onnx FILE [--opset N] [--softmax] "
     "[--fold-normalization] [--force]",
     "write the model as ONNX",
     "",
     {&kOnnxExport},
     "trainer export --checkpoint runs/lenet --onnx lenet.onnx --fold-normalization"},
    {"import",
     "trainer import MODEL.onnx --out DIR [--input-shape C,H,W] [--normalize N]",
     "an ONNX model as a config and its weights",
     "",
     {&kOnnxImport},
     "trainer import resnet18.onnx --out models --normalize imagenet"},
    {"summary",
     "trainer summary --config FILE [--batch-size N] [--json]",
     "the model table",
     "",
     {},
     "trainer summary --config configs/resnet50.yaml --batch-size 32"},
};

// A paragraph of notes refilled to the width: its first line from column 0 on, the rest indented
// as its second line is in the source.
std::string refill(const std::string& note, size_t width) {
  const size_t second = note.find('\n');
  size_t indent = 0;
  if (second != std::string::npos && second + 1 < note.size())
    indent = note.find_first_not_of(' ', second + 1) - (second + 1);
  return fill_words(note, 0, indent, width);
}

// A command's usage line: its synopsis, and what it does from column 55 on where both fit the
// width, else under it.
std::string usage_of(const Command& c, size_t width) {
  const size_t column = 55;
  if (2 + c.synopsis.size() + 2 <= column && column + c.what.size() <= width)
    return "  " + c.synopsis + std::string(column - 2 - c.synopsis.size(), ' ') + c.what + "\n";
  const size_t first_flag = c.synopsis.find(" -");
  const size_t indent = std::min<size_t>(first_flag == std::string::npos ? 4 : first_flag + 3, 24);
  return "  " + fill_words(c.synopsis, 2, indent, width) + "      " +
         fill_words(c.what, 6, 6, width);
}

// One flag a line, its text from column `column` + 2 on (two spaces after a longer name), filled
// to the width with its further lines from column 21.
std::string flag_rows(const std::vector<const Flag*>& flags, size_t width, size_t column = 19) {
  std::string out;
  for (const Flag* f : flags) {
    const std::string head =
        "  " + f->name +
        std::string(f->name.size() + 2 > column ? 2 : column - f->name.size(), ' ');
    out += head + fill_words(f->text, head.size(), 21, width);
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

std::string general_help(size_t width) {
  std::string s =
      "tandem trainer: train a YAML-described CNN on the CPU or an NVIDIA GPU.\n\nusage:\n";
  for (const Command& c : kCommands) s += usage_of(c, width);
  s += "  trainer help [COMMAND] | --help | --version\n\n" + refill(kDevices, width) +
       "\nflags (override the config):\n" + flag_rows(flags_of_list("flags"), width) + "\n";
  for (const Command& c : kCommands)
    if (c.name == "bench")
      s += refill(c.about, width) + flag_rows(flags_of_list("bench"), width, 20) + "\n";
  return s + refill(kDataParallel, width) + "\n" + refill(kSignals, width) + "\n" +
         refill(kExitStatus, width);
}

std::vector<std::string> command_names() {
  std::vector<std::string> out;
  for (const Command& c : kCommands) out.push_back(c.name);
  return out;
}

std::string command_help(const std::string& command, size_t width) {
  const auto c = std::find_if(kCommands.begin(), kCommands.end(),
                              [&](const Command& k) { return k.name == command; });
  if (c == kCommands.end()) return general_help(width);
  std::string s = "usage:\n" + usage_of(*c, width);
  if (!c->about.empty()) s += "\n" + refill(c->about, width);
  std::vector<const Flag*> flags;
  for (const Flag& f : kFlags)
    if (f.of(command)) flags.push_back(&f);
  // Aligned as in the general help, where bench's own flags (--batch-sizes LIST) take 20.
  s += "\nflags:\n" + flag_rows(flags, width, command == "bench" ? 20 : 19);
  for (const std::string* note : c->notes) s += "\n" + refill(*note, width);
  // The example on one line, as it is copied (each fits 80 columns).
  return s + "\nexample:\n  " + c->example + "\n";
}

std::vector<std::string> commands_of_flag(const std::string& flag) {
  std::vector<std::string> out;
  for (const Command& c : kCommands)
    for (const Flag& f : kFlags)
      if (f.word() == flag && f.of(c.name)) {
        out.push_back(c.name);
        break;
      }
  return out;
}

std::vector<std::string> flag_names() {
  std::vector<std::string> out;
  for (const Flag& f : kFlags)
    if (const std::string name = f.word(); std::find(out.begin(), out.end(), name) == out.end())
      out.push_back(name);
  return out;
}

std::optional<FlagUse> flag_use(const std::string& flag, const std::string& command) {
  for (const Flag& f : kFlags)
    if (f.word() == flag && f.of(command)) return FlagUse{f.takes_value(), f.set};
  return std::nullopt;
}

bool is_switch(const std::string& flag) {
  if (flag == "--help" || flag == "--version") return true;
  return std::any_of(kFlags.begin(), kFlags.end(), [&](const Flag& f) { return f.name == flag; });
}

}  // namespace tandem
