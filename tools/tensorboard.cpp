// TensorBoard event files: Event protobufs (tools/tensorboard_event.proto) framed as TFRecords,
// with CRC32C from Intel's ISA-L.
#include "tools/tensorboard.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "engine/epoch_figures.h"
#include "engine/error.h"

#ifdef TANDEM_WITH_TENSORBOARD
#include <isa-l/crc.h>

#include "tensorboard_event.pb.h"
#endif

namespace tandem {
namespace fs = std::filesystem;

namespace {

double wall_time() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

#ifdef TANDEM_WITH_TENSORBOARD

bool tensorboard_available() { return true; }

uint32_t masked_crc32c(const void* data, size_t n) {
  // ISA-L's iSCSI CRC is CRC32C; it neither inverts the initial value nor the result itself.
  const uint32_t crc = ~crc32_iscsi(static_cast<unsigned char*>(const_cast<void*>(data)),
                                    static_cast<int>(n), 0xFFFFFFFFu);
  return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
}

TensorBoardWriter::TensorBoardWriter(const std::string& dir, const std::string& run) {
  std::string folder_name = run;
  for (char& c : folder_name)
    if (c == ':' || c == '/') c = '-';
  const fs::path folder = fs::path(dir) / folder_name;
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec)
    throw UsageError(fmt::format("--tensorboard {}: cannot create the folder {} ({})", dir,
                                 folder.string(), ec.message()),
                     "give a writable folder");
  char host[256] = "localhost";
  gethostname(host, sizeof host - 1);
  path_ = (folder / fmt::format("events.out.tfevents.{}.{}.{}", static_cast<int64_t>(wall_time()),
                                host, getpid()))
              .string();
  out_.open(path_, std::ios::binary);
  if (!out_) throw UsageError("--tensorboard: cannot write " + path_, "give a writable folder");
  tensorboard::Event first;
  first.set_wall_time(wall_time());
  first.set_file_version("brain.Event:2");
  record(first.SerializeAsString());
}

TensorBoardWriter::~TensorBoardWriter() = default;

void TensorBoardWriter::record(const std::string& data) {
  // A TFRecord: length (little-endian uint64), its masked CRC, the data, the data's masked CRC.
  const uint64_t length = data.size();
  unsigned char header[12];
  for (int i = 0; i < 8; ++i) header[i] = static_cast<unsigned char>(length >> (8 * i));
  const uint32_t length_crc = masked_crc32c(header, 8);
  const uint32_t data_crc = masked_crc32c(data.data(), data.size());
  for (int i = 0; i < 4; ++i) header[8 + i] = static_cast<unsigned char>(length_crc >> (8 * i));
  unsigned char footer[4];
  for (int i = 0; i < 4; ++i) footer[i] = static_cast<unsigned char>(data_crc >> (8 * i));
  out_.write(reinterpret_cast<const char*>(header), sizeof header);
  out_.write(data.data(), static_cast<std::streamsize>(data.size()));
  out_.write(reinterpret_cast<const char*>(footer), sizeof footer);
  out_.flush();  // TensorBoard reads the file while it grows
  if (!out_) throw UsageError("writing " + path_ + " failed", "check the disk space");
}

void TensorBoardWriter::scalar(const std::string& tag, int64_t step, double value) {
  tensorboard::Event event;
  event.set_wall_time(wall_time());
  event.set_step(step);
  tensorboard::SummaryValue* v = event.mutable_summary()->add_value();
  v->set_tag(tag);
  v->set_simple_value(static_cast<float>(value));
  record(event.SerializeAsString());
}

#else

bool tensorboard_available() { return false; }

uint32_t masked_crc32c(const void*, size_t) { return 0; }

TensorBoardWriter::TensorBoardWriter(const std::string& dir, const std::string&) {
  throw UsageError(
      "--tensorboard " + dir +
          ": this build has no TensorBoard output (protobuf or "
          "ISA-L was not found)",
      "install libprotobuf-dev, protobuf-compiler and libisal-dev (bash tools/setup.sh "
      "does), then rebuild; or use --metrics FILE");
}

TensorBoardWriter::~TensorBoardWriter() = default;
void TensorBoardWriter::record(const std::string&) {}
void TensorBoardWriter::scalar(const std::string&, int64_t, double) {}

#endif

void TensorBoardWriter::epoch(const EpochStats& e) {
  for (const EpochFigure& f : epoch_figures())
    if ((f.outputs & kTensorBoard) && has_figure(e, f))
      scalar(std::string("epoch/") + f.name, e.epoch, figure_value(e, f));
}

void TensorBoardWriter::step(const LoggedStep& s) {
  const int64_t at = static_cast<int64_t>(s.step);
  scalar("step/loss", at, s.loss);
  scalar("step/accuracy", at, s.accuracy);
  scalar("step/learning_rate", at, s.learning_rate);
  scalar("step/images_per_second", at, s.images_per_second);
  if (s.grad_norm >= 0) scalar("step/grad_norm", at, s.grad_norm);
  if (s.loss_scale > 0) scalar("step/loss_scale", at, s.loss_scale);
}

}  // namespace tandem
