// The program contract in one place: what every lab program promises and compare relies on. The
// exit statuses, the markers a program puts in front of a shape's failure message, the counters
// and context keys compare reads from Google Benchmark's JSON, and the limits of the CPU
// reference. Programs and compare both include this header; the help texts are written from it.
#pragma once

#include <string>

namespace lab {

// Exit statuses of every lab program.
enum ExitCode : int {
  kExitOk = 0,
  kExitWrongResult = 1,  // verification failed, or the GPU faulted while computing a result
  kExitUsage = 2,        // bad flag, bad shape, bad input
  kExitNoDevice = 3,     // no usable CUDA device (none, no driver, or wrong architecture)
  kExitOutOfMemory = 4,  // the device has not enough free memory for the problem
};

// The "Exit status: ..." paragraph of a program's --help.
std::string exit_status_help();

// A shape that could not run is a skipped benchmark whose message starts with one of these
// markers; any other message is a failure of the shape (a wrong result, a fault).
inline constexpr const char* kOutOfMemoryMarker = "[lab:oom] ";      // the device ran out of memory
inline constexpr const char* kNotApplicableMarker = "[lab:n/a] ";    // the variant does not support it

// Counters every timed shape reports (Google Benchmark user counters).
inline constexpr const char* kHostShareCounter = "host_share";
// Under kHostBoundShare the GPU had work queued the whole time (GPU-bound); at or above, the GPU
// waited on the host (launch overheads, synchronous copies, allocations: host-bound).
inline constexpr double kHostBoundShare = 0.5;

// Google Benchmark context keys every program writes (compare reads them back).
namespace context {
inline constexpr const char* kProgram = "lab_program";
inline constexpr const char* kTopic = "lab_topic";
inline constexpr const char* kRole = "lab_role";
inline constexpr const char* kDevice = "lab_device";
inline constexpr const char* kDeviceUuid = "lab_device_uuid";
inline constexpr const char* kArch = "lab_arch";
inline constexpr const char* kDriver = "lab_driver";
inline constexpr const char* kRuntime = "lab_runtime";
inline constexpr const char* kSmClockMhz = "lab_sm_clock_mhz";
inline constexpr const char* kMemClockMhz = "lab_mem_clock_mhz";
inline constexpr const char* kPeakCopyGbs = "lab_peak_copy_gbs";
inline constexpr const char* kPeakFp32Tflops = "lab_peak_fp32_tflops";
inline constexpr const char* kCache = "lab_cache";
inline constexpr const char* kSeed = "lab_seed";
inline constexpr const char* kVerification = "lab_verification";
inline constexpr const char* kPrefix = "lab_";  // every key above starts with it
}  // namespace context

// The step of a topic's baseline, library and final optimized variant in --describe's "step";
// intermediate optimized steps are 1, 2, ... and run (and are listed) before it.
inline constexpr int kFinalStep = 1000;

// Timed shapes whose reference is cheap enough to compute on the CPU are verified too.
inline constexpr double kVerifyBytesLimit = double(1u << 30);
inline constexpr double kVerifyFlopsLimit = 4e9;
// "1 GiB and 4 GFLOP", for messages.
std::string verify_limits_text(const char* conjunction = "and");

}  // namespace lab
