// braid-train's command line: bad arguments fail with a message that names
// the argument; short runs on the executor, in every strategy's plan and in
// a plan from a file, report loss and speed and pass --check (bitwise the
// serial runner's weights).
#include <doctest/doctest.h>


#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "braid/model/device_table.hpp"
#include "braid/plan/plan_json.hpp"
#include "braid/planner/make_plan.hpp"
#include "braid/profiler/measurements.hpp"
#include "braid/profiler/profile_json.hpp"
#include "run_command.hpp"
#include "train/training_graph.hpp"

#ifdef BRAID_TRAIN_PATH

namespace {

using Run = braid::testing::CommandRun;

Run braid_train(const std::string& args) { return braid::testing::run_command(std::string(BRAID_TRAIN_PATH) + " " + args); }

void check_fails(const std::string& args, const std::string& expected) {
    CAPTURE(args);
    const Run run = braid_train(args);
    CAPTURE(run.output);
    CHECK(run.status != 0);
    CHECK(run.output.find(expected) != std::string::npos);
}

// Runs `program` with each case's arguments and checks that it fails, not
// skips (exit 77: no GPU), with a message containing the case's text.
[[maybe_unused]] void check_refusals(const std::string& program, const std::map<std::string, std::string>& cases) {
    for (const auto& c : cases) {
        const std::string& args = c.first;  // variables, not bindings: CAPTURE's lambda takes them before clang 16 too
        const std::string& expected = c.second;
        CAPTURE(args);
        const Run r = braid::testing::run_command(program + " " + args);
        CAPTURE(r.output);
        CHECK(r.status != 0);
        CHECK(r.status != 77);
        CHECK(r.output.find(expected) != std::string::npos);
    }
}

const std::string tiny = "--image 32 --width-scale 0.125 --batch 2 --classes 4 --iters 2";

// A braid plan for `net` in the `tiny` configuration, written to a file.
std::string write_plan(const std::string& net) {
    braid::samples::TrainConfig c;
    c.model.net = net;
    c.model.image = 32;
    c.model.width_scale = 0.125;
    c.model.batch = 2;
    c.model.classes = 4;
    const braid::samples::TrainingGraph tg = braid::samples::build_training_graph(c);
    const braid::DeviceSpec& device = braid::find_device("a100");
    braid::PlanOptions options;
    options.strategy = "braid";
    const braid::Plan plan =
        braid::make_plan(tg.graph, device, braid::estimate_costs(device, braid::samples::op_estimates(tg)), options);
    const std::filesystem::path path = std::filesystem::temp_directory_path() /
                                       ("braid-samples-" + net + "-" + std::to_string(getpid()) + ".json");
    std::ofstream(path) << braid::to_json(plan, tg.graph).dump(1);
    return path.string();
}

}  // namespace

TEST_SUITE("cpu") {

TEST_CASE("braid-train rejects bad arguments with a clear error") {
    check_fails("--net alexnet",
                "--net: alexnet not in {googlenet,resnet18,resnet34,resnet50,resnet101,resnet152,inception_v3}");
    check_fails("", "which network? Give --net (googlenet, resnet18");
    check_fails("--net resnet18 --batch 0", "--batch: must be a number from 1 to 1048576, got '0'");
    check_fails("--net resnet18 --classes 1", "--classes: must be a number from 2 to 16777216");
    check_fails("--net resnet18 --classes 4294967295", "--classes: must be a number from 2 to 16777216");
    check_fails("--net resnet18 --width-scale 0", "--width-scale: must be a number from 1e-06 to 64");
    check_fails("--net resnet18 --width-scale nan", "--width-scale: expected a number, got 'nan'");
    check_fails("--net resnet18 --image 100000", "--image: must be a number from 1 to 8192, got '100000'");
    check_fails("--net resnet18 --max-streams 100000 --dry-run", "--max-streams: must be a number from 1 to 128");
    // SGD settings: finite, and where training can converge.
    check_fails("--net resnet18 --lr nan", "--lr: expected a number, got 'nan'");
    check_fails("--net resnet18 --lr -1e30", "--lr: must be a number from 0 to 100, got '-1e30'");
    check_fails("--net resnet18 --lr 1e300", "--lr: must be a number from 0 to 100, got '1e300'");
    check_fails("--net resnet18 --momentum inf", "--momentum: expected a number, got 'inf'");
    check_fails("--net resnet18 --momentum 1", "--momentum: must be a number of at least 0 and below 1, got '1'");
    check_fails("--net resnet18 --weight-decay -0.1", "--weight-decay: must be a number from 0 to 1, got '-0.1'");
    check_fails("--net resnet18 --weight-decay 1e300", "--weight-decay: must be a number from 0 to 1, got '1e300'");
    // An empty value (an unset shell variable) is refused, not taken as the option left out.
    for (const char* option : {"--plan-out", "--device", "--calibration", "--strategy", "--prototxt", "--profile-out"}) {
        CAPTURE(option);
        check_fails("--net resnet18 " + tiny + " " + option + " ''", std::string(option) + ": must not be empty");
    }
    check_fails("--net resnet18 --iters 0", "--iters: must be a number of at least 1");
    check_fails("--net googlenet --image 16", "the smallest image googlenet accepts is 47x47");
    check_fails("--net googlenet --no-aux --image 16", "the smallest image googlenet accepts is 31x31");
    check_fails("--net inception_v3 --image 224 --summary",
                "layer 'AuxLogits.conv1.conv': convolution: a 5x5 kernel with padding 0 does not fit a 3x3 input; the "
                "smallest image inception_v3 accepts is 299x299 (75x75 without the auxiliary classifiers)");
    check_fails("--net inception_v3 --no-aux --image 64 --summary", "the smallest image inception_v3 accepts is 75x75");
    check_fails("--net resnet18 --backend tpu", "--backend: tpu not in {host,cuda}");
    check_fails("--net resnet18 --conv-api cudnn8", "--conv-api: cudnn8 not in {legacy,graph,auto}");
    check_fails("--net resnet18 --batch-norm miopen", "--batch-norm: miopen not in {own,cudnn,auto}");
    check_fails("--net resnet18 --batch-norm cudnn " + tiny, "--batch-norm chooses cuDNN's kernels for --backend cuda");
    check_fails("--net resnet18 --conv-api graph " + tiny, "--conv-api chooses cuDNN's kernels for --backend cuda");
    check_fails("--net resnet18 --layout nchw8", "--layout: nchw8 not in {nchw,nhwc,auto}");
    check_fails("--net resnet18 --layout nhwc " + tiny, "--layout nhwc lays out the GPU's activations for --backend cuda");
    check_fails("--net resnet18 --pdl yes", "--pdl: yes not in {off,on,auto}");
    check_fails("--net resnet18 --pdl on " + tiny,
                "--pdl on launches the GPU's own kernels programmatically for --backend cuda; the host backend "
                "launches no kernels");
    check_fails("--net resnet18 --pdl auto " + tiny, "--pdl auto launches the GPU's own kernels programmatically");
    check_fails("--net resnet18 --mode graph " + tiny, "--mode graph");
    check_fails("--net resnet18 --strategy fastest " + tiny, "--strategy 'fastest' is neither");
    check_fails("--net resnet18 --strategy /nonexistent/plan.json " + tiny, "plan file '/nonexistent/plan.json' does not exist");
    check_fails("--net resnet18 --device tpu3 --summary", "unknown device 'tpu3'");
}

TEST_CASE("braid-train --prototxt trains a Caffe net, the command line over the file") {
    const std::string resnet50 = BRAID_SOURCE_DIR "/samples/caffe/models/resnet50.prototxt";
#if BRAID_TOOLS_HAVE_CAFFE
    const Run summary = braid_train("--prototxt " + resnet50 + " --summary --classes 10");
    CAPTURE(summary.output);
    CHECK(summary.status == 0);
    CHECK(summary.output.find("layer4.2.conv3") != std::string::npos);
    CHECK(summary.output.find("note: skipped: layers of the TEST phase only") != std::string::npos);
    const Run train = braid_train("--prototxt " + resnet50 +
                                  " --batch 1 --image 32 --classes 10 --iters 1 --strategy braid --max-streams 2 --check");
    CAPTURE(train.output);
    CHECK(train.status == 0);
    CHECK(train.output.find("ResNet-50 (" + resnet50 + "): batch 1, 32x32 images, 10 classes") != std::string::npos);
    CHECK(train.output.find("check against a serial run: bitwise identical") != std::string::npos);
    check_fails("--prototxt /nonexistent/net.prototxt", "cannot read prototxt '/nonexistent/net.prototxt'");
#else
    check_fails("--prototxt " + resnet50, "this build has no Caffe prototxt reader");
#endif
    check_fails("--prototxt " + resnet50 + " --net resnet50", "--net excludes --prototxt");
    check_fails("--batch 2", "which network? Give --net");
}

TEST_CASE("braid-train --backend cuda: no CUDA part, no device (exit 77), or a bitwise-checked GPU run") {
    const Run run = braid_train("--net resnet18 " + tiny + " --backend cuda --mode graph --check");
    CAPTURE(run.output);
#if BRAID_SAMPLES_WITH_CUDA
    if (run.status == 77) {
        CHECK(run.output.find("braid-train: no CUDA device") != std::string::npos);
    } else {
        CHECK(run.status == 0);
        CHECK(run.output.find("cuda backend: ") != std::string::npos);
        CHECK(run.output.find("check against a serial run: bitwise identical") != std::string::npos);
    }
#else
    CHECK(run.status == 2);
    CHECK(run.output.find("--backend cuda: this build of braid-train has no CUDA part") != std::string::npos);
#endif
    // Without --backend cuda there is nothing to replay.
    check_fails("--net resnet18 --mode graph " + tiny, "--mode graph replays a captured CUDA graph");
#if BRAID_SAMPLES_WITH_CUDA
    // The files a GPU run reads and writes are checked before a GPU is looked for: errors, not skips.
    const std::string other_plan = write_plan("resnet34");
    check_refusals(BRAID_TRAIN_PATH,
                   {{"--net resnet18 " + tiny + " --backend cuda --calibration /nonexistent/c.json",
                     "cannot open '/nonexistent/c.json' for reading"},
                    // CLI11 would turn these into seed 18446744073709551615 without a word.
                    {"--net resnet18 " + tiny + " --seed -1", "--seed: must be a whole number from 0 to 18446744073709551615, got '-1'"},
                    {"--net resnet18 " + tiny + " --seed 18446744073709551616", "--seed: must be a whole number"},
                    {"--net resnet18 " + tiny + " --backend cuda --device /nonexistent/d.json",
                     "cannot open '/nonexistent/d.json' for reading"},
                    {"--net resnet18 " + tiny + " --backend cuda --strategy " + other_plan, "this plan was made for graph"},
                    {"--net resnet18 " + tiny + " --backend cuda --profile-out /nonexistent/p.json",
                     "--profile-out: cannot write '/nonexistent/p.json': folder '/nonexistent' does not exist"},
                    {"--net resnet18 " + tiny + " --backend cuda --plan-out /tmp", "--plan-out: '/tmp' is a folder"}});
    std::filesystem::remove(other_plan);
    // Programmatic launches change when kernels start, never what they
    // compute: the braid plan's weights equal the serial run's, in graph
    // and eager mode (a GPU before compute capability 9.0 refuses, naming it).
    for (const char* mode : {"graph", "eager"}) {
        const Run pdl = braid_train("--net resnet18 " + tiny + " --backend cuda --strategy braid --max-streams 2 --pdl on "
                                    "--check --mode " + mode);
        CAPTURE(pdl.output);
        if (pdl.status == 77) {
            CHECK(pdl.output.find("braid-train: no CUDA device") != std::string::npos);
        } else if (pdl.output.find("programmatic launch needs") != std::string::npos) {
            CHECK(pdl.status != 0);  // before compute capability 9.0, or kernels built without compute_90
        } else {
            CHECK(pdl.status == 0);
            CHECK(pdl.output.find("check against a serial run: bitwise identical") != std::string::npos);
            if (std::string(mode) == "graph") {
                CHECK(pdl.output.find(" programmatic edges") != std::string::npos);
                CHECK(pdl.output.find(" 0 programmatic edges") == std::string::npos);
            }
        }
    }
    // NHWC activations: every bundled net takes them (GoogLeNet with its
    // biased convolutions, LRN and auxiliary heads too).
    for (const std::string& net : {"resnet50 " + tiny, std::string("googlenet --image 47 --width-scale 0.125 --batch 2")}) {
        const Run nhwc = braid_train("--net " + net + " --backend cuda --layout nhwc --dry-run");
        CAPTURE(nhwc.output);
        CHECK(nhwc.status == 0);
    }
#if BRAID_TOOLS_HAVE_CAFFE
    // A net with layers that cannot take them is refused before any GPU is
    // looked for; auto keeps NCHW for it and says why. Here a concat reads
    // a convolution's output, which cannot be an NHWC channel slice.
    const std::filesystem::path unfit =
        std::filesystem::temp_directory_path() / ("braid-unfit-" + std::to_string(getpid()) + ".prototxt");
    {
        std::ofstream out(unfit);
        out << R"(name: "unfit"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 dim: 16 dim: 16 } } }
layer { name: "a" type: "Convolution" bottom: "data" top: "a" convolution_param { num_output: 4 kernel_size: 1 } }
layer { name: "b" type: "Convolution" bottom: "data" top: "b" convolution_param { num_output: 4 kernel_size: 1 } }
layer { name: "cat" type: "Concat" bottom: "a" bottom: "b" top: "cat" }
layer { name: "pool" type: "Pooling" bottom: "cat" top: "pool" pooling_param { pool: AVE global_pooling: true } }
layer { name: "fc" type: "InnerProduct" bottom: "pool" top: "fc" inner_product_param { num_output: 10 } }
layer { name: "prob" type: "Softmax" bottom: "fc" top: "prob" }
)";
    }
    const std::string unfit_run = "--prototxt " + unfit.string() + " --classes 10 --backend cuda --dry-run --layout ";
    check_fails(unfit_run + "nhwc", "--layout nhwc: concat 'cat' reads 'a' from conv 'a', which cannot write an NHWC "
                                    "channel slice; give --layout nchw");
    const Run automatic = braid_train(unfit_run + "auto");
    CAPTURE(automatic.output);
    CHECK(automatic.status == 0);
    CHECK(automatic.output.find("layout: NCHW activations (concat 'cat' reads 'a'") != std::string::npos);
    std::filesystem::remove(unfit);
#endif
    // Inception-v3's concats take NHWC: their inputs become channel slices with a pixel stride.
    const Run inception =
        braid_train("--net inception_v3 --backend cuda --layout nhwc --dry-run --image 299 --width-scale 0.125 --batch 2");
    CAPTURE(inception.output);
    CHECK(inception.status == 0);
#endif
}

#if BRAID_SAMPLES_WITH_CUDA
TEST_CASE("braid-train --max-connections: the hardware queues an eager run's plan is made for") {
    check_fails("--net resnet18 --max-connections 4 " + tiny,
                "--max-connections sets the hardware work queues of a CUDA context (--backend cuda)");
    check_fails("--net resnet18 --backend cuda --max-connections 0 --dry-run",
                "--max-connections: must be a number from 1 to 32, got '0'");
    check_fails("--net resnet18 --backend cuda --max-connections 33 --dry-run",
                "--max-connections: must be a number from 1 to 32, got '33'");
    for (const char* bad : {"abc", "0", "64"}) {
        CAPTURE(bad);
        const Run r = braid::testing::run_command(std::string("CUDA_DEVICE_MAX_CONNECTIONS=") + bad + " " + BRAID_TRAIN_PATH +
                                                  " --net resnet18 " + tiny + " --backend cuda --dry-run");
        CAPTURE(r.output);
        CHECK(r.status == 1);
        CHECK(r.output.find(std::string("CUDA_DEVICE_MAX_CONNECTIONS='") + bad + "': expected a whole number from 1 to 32") !=
              std::string::npos);
    }
    // The streams of the plan braid makes for ResNet-50 at batch 32, launched eagerly over `queues` queues.
    const auto streams = [](const std::string& queues) {
        const Run r = braid_train("--net resnet50 --batch 32 --backend cuda --mode eager --strategy braid --max-streams 16 "
                                  "--dry-run " + queues);
        CAPTURE(r.output);
        CHECK(r.status == 0);
        const std::size_t at = r.output.find(" streams, ");
        REQUIRE(at != std::string::npos);
        const std::size_t from = r.output.rfind(' ', at - 1) + 1;
        return std::stoi(r.output.substr(from, at - from));
    };
    // One queue runs every stream's kernels in launch order: more streams would add waits and no overlap.
    CHECK(streams("--max-connections 1") == 1);
    const int eight = streams("--max-connections 8");
    CHECK(eight > 1);
    CHECK(eight <= 8);
    CHECK(streams("--max-connections 32") > 8);
    CHECK(streams("") == eight);  // not set: the driver's 8
    // Where the number comes from, and the streams that share a queue.
    const Run set = braid::testing::run_command(std::string("CUDA_DEVICE_MAX_CONNECTIONS=4 ") + BRAID_TRAIN_PATH + " --net resnet18 " +
                                                tiny + " --backend cuda --mode eager --strategy nimble --dry-run");
    CAPTURE(set.output);
    CHECK(set.status == 0);
    CHECK(set.output.find("eager launches: 4 hardware queues (CUDA_DEVICE_MAX_CONNECTIONS=4); the plan's ") != std::string::npos);
    CHECK(set.output.find("streams share them, stream s with s + 4, in launch order") != std::string::npos);
    const Run option = braid::testing::run_command(std::string("CUDA_DEVICE_MAX_CONNECTIONS=4 ") + BRAID_TRAIN_PATH +
                                                   " --net resnet18 " + tiny + " --backend cuda --mode eager --dry-run "
                                                   "--max-connections 1");
    CAPTURE(option.output);
    CHECK(option.output.find("eager launches: 1 hardware queue (CUDA_DEVICE_MAX_CONNECTIONS=1)") != std::string::npos);
    const Run graph = braid_train("--net resnet18 " + tiny + " --backend cuda --mode graph --dry-run --max-connections 4");
    CAPTURE(graph.output);
    CHECK(graph.status == 0);
    CHECK(graph.output.find("eager launches") == std::string::npos);
}
#endif

TEST_CASE("braid-train trains, reports and checks") {
    const Run run = braid_train("--net resnet18 " + tiny + " --check");
    CAPTURE(run.output);
    CHECK(run.status == 0);
    CHECK(run.output.find("iteration 1/2  loss ") != std::string::npos);
    CHECK(run.output.find("images/s") != std::string::npos);
    CHECK(run.output.find("check against a serial run: bitwise identical") != std::string::npos);

    for (const std::string strategy : {"braid", "nimble", "glp4nn --max-streams 3"}) {
        const Run planned = braid_train("--net googlenet --image 47 --width-scale 0.125 --batch 3 --classes 4 "
                                        "--iters 2 --check --strategy " + strategy);
        CAPTURE(planned.output);
        CHECK(planned.status == 0);
        CHECK(planned.output.find("plan: " + strategy.substr(0, strategy.find(' '))) != std::string::npos);
        CHECK(planned.output.find("check against a serial run: bitwise identical") != std::string::npos);
    }

    const Run summary = braid_train("--net resnet50 --summary");
    CAPTURE(summary.output);
    CHECK(summary.status == 0);
    CHECK(summary.output.find("25557032 parameters") != std::string::npos);
    CHECK(summary.output.find("layer1.0.conv1") != std::string::npos);
    CHECK(summary.output.find("roofline estimate on h200") != std::string::npos);
}

TEST_CASE("braid-train --net inception_v3: 299x299 by default, its layer table, and a checked run") {
    const Run summary = braid_train("--net inception_v3 --summary");
    CAPTURE(summary.output);
    CHECK(summary.status == 0);
    CHECK(summary.output.find("inception_v3: 320 layers, 27161264 parameters") != std::string::npos);
    CHECK(summary.output.find("(3x299x299 images, 1000 classes)") != std::string::npos);
    CHECK(summary.output.find("Mixed_6b.branch7x7_2.conv") != std::string::npos);
    CHECK(summary.output.find("1x7/1 pad 0x3") != std::string::npos);  // the window column tells 1x7 from 7x1
    CHECK(summary.output.find("7x1/1 pad 3x0") != std::string::npos);
    CHECK(summary.output.find("AuxLogits.fc") != std::string::npos);
    const Run no_aux = braid_train("--net inception_v3 --no-aux --summary");
    CAPTURE(no_aux.output);
    CHECK(no_aux.output.find("inception_v3: 310 layers, 23834568 parameters") != std::string::npos);
    CHECK(no_aux.output.find("AuxLogits") == std::string::npos);
    // --image still wins, and the other nets keep 224.
    CHECK(braid_train("--net inception_v3 --image 320 --summary").output.find("(3x320x320 images") != std::string::npos);
    CHECK(braid_train("--net resnet18 --summary").output.find("(3x224x224 images") != std::string::npos);

    // The default net (299x299, AuxLogits) at 1/8 width, in a braid plan of several streams (the
    // calibrated model runs a net this small on one), checked against serial. 75x75: graph_test.cpp.
    const Run run = braid_train("--net inception_v3 --width-scale 0.125 --batch 2 --classes 4 --iters 1 "
                                "--strategy braid --max-streams 4 --calibration none --check");
    CAPTURE(run.output);
    CHECK(run.status == 0);
    CHECK(run.output.find("inception_v3: batch 2, 299x299 images, 4 classes, width scale 0.125") != std::string::npos);
    CHECK(run.output.find("plan: braid (for h200), ") != std::string::npos);
    CHECK(run.output.find("plan: braid (for h200), 1 streams") == std::string::npos);
    CHECK(run.output.find("check against a serial run: bitwise identical") != std::string::npos);
}

TEST_CASE("braid-train runs a plan from a file, and refuses one made for another graph") {
    const std::string plan = write_plan("resnet18");
    const Run ok = braid_train("--net resnet18 " + tiny + " --check --strategy " + plan);
    CAPTURE(ok.output);
    CHECK(ok.status == 0);
    CHECK(ok.output.find("plan: braid (for a100)") != std::string::npos);
    CHECK(ok.output.find("bitwise identical") != std::string::npos);
    check_fails("--net resnet34 " + tiny + " --strategy " + plan, "this plan was made for graph");

    // A plan that breaks an invariant (a step dropped) names its file.
    nlohmann::json j = nlohmann::json::parse(std::ifstream(plan));
    j["steps"].erase(j["steps"].begin());
    j["waits"] = nlohmann::json::array();
    const std::string broken = plan + ".broken.json";
    std::ofstream(broken) << j.dump();
    check_fails("--net resnet18 " + tiny + " --strategy " + broken, broken + ": invalid plan (strategy 'braid'): ");
    std::filesystem::remove(broken);
    std::filesystem::remove(plan);
}

TEST_CASE("braid-train --tune measures braid's plans on the host, trains with the winner, and caches it") {
    const std::filesystem::path cache =
        std::filesystem::temp_directory_path() / ("braid-tune-cli-" + std::to_string(getpid()));
    std::filesystem::remove_all(cache);
    const std::string plan_out = cache.string() + ".plan.json";
    const std::string args = "--net resnet18 " + tiny + " --check --max-streams 2 --tune --tune-top 3 --tune-budget 20 "
                             "--tune-cache " + cache.string();
    const Run first = braid_train(args + " --plan-out " + plan_out);
    CAPTURE(first.output);
    CHECK(first.status == 0);
    CHECK(first.output.find("host backend, braid strategy") != std::string::npos);
    CHECK(first.output.find("candidate plans on host (") != std::string::npos);
    CHECK(first.output.find("tune: stored as " + cache.string() + "/fnv1a64-") != std::string::npos);
    CHECK(first.output.find("serial baseline") != std::string::npos);
    CHECK(first.output.find("check against a serial run: bitwise identical") != std::string::npos);
    // The plan the run used, with what tuning measured.
    const nlohmann::json plan = nlohmann::json::parse(std::ifstream(plan_out));
    CHECK(plan.at("measured").at("backend") == "host");
    CHECK(plan.at("measured").at("batch") == 2);
    CHECK(plan.at("measured").at("candidates").size() >= 4);  // 3 of braid's, serial, and nimble and glp4nn unless the same

    const Run second = braid_train(args);
    CAPTURE(second.output);
    CHECK(second.status == 0);
    CHECK(second.output.find("tune: using the tuned plan in " + cache.string()) != std::string::npos);
    CHECK(second.output.find("tune: measuring") == std::string::npos);
    CHECK(second.output.find("bitwise identical") != std::string::npos);

    // Without the cache it measures again.
    const Run uncached = braid_train("--net resnet18 " + tiny + " --max-streams 2 --tune --tune-top 2 --tune-budget 5 --no-tune-cache");
    CAPTURE(uncached.output);
    CHECK(uncached.status == 0);
    CHECK(uncached.output.find("tune: measuring") != std::string::npos);
    CHECK(uncached.output.find("tune: stored") == std::string::npos);

    // A cache folder that cannot be made costs the next run a tuning, not this one its training.
    const Run unwritable = braid_train("--net resnet18 " + tiny + " --tune --tune-top 2 --tune-budget 10 --tune-cache /proc/braid-cache");
    CAPTURE(unwritable.output);
    CHECK(unwritable.status == 0);
    CHECK(unwritable.output.find("tune: not cached: tuning cache: cannot write '/proc/braid-cache/") != std::string::npos);
    CHECK(unwritable.output.find("cannot make folder '/proc/braid-cache'") != std::string::npos);
    CHECK(unwritable.output.find("iteration 2/2") != std::string::npos);

    check_fails("--net resnet18 " + tiny + " --tune --strategy nimble",
                "--tune measures braid's candidate plans and cannot tune --strategy nimble");
    check_fails("--net resnet18 " + tiny + " --tune-top 3", "--tune-top requires --tune");
    check_fails("--net resnet18 " + tiny + " --tune --tune-budget 0", "--tune-budget: must be a positive number");
    std::filesystem::remove_all(cache);
    std::filesystem::remove(plan_out);
}

TEST_CASE("braid-train --dry-run and --profile-out: what they need and refuse") {
    const Run dry = braid_train("--net resnet18 " + tiny + " --strategy nimble --dry-run");
    CAPTURE(dry.output);
    CHECK(dry.status == 0);
    CHECK(dry.output.find("dry run: nothing is trained") != std::string::npos);
    CHECK(dry.output.find("plan 'nimble' (for h200) fits graph fnv1a64:") != std::string::npos);
    CHECK(dry.output.find("every dependency ordered") != std::string::npos);
    CHECK(dry.output.find("iteration 1/") == std::string::npos);
    check_fails("--net resnet18 " + tiny + " --dry-run --tune", "--dry-run only makes and checks the plan; --tune");
    check_fails("--net resnet18 " + tiny + " --profile-out p.json",
                "--profile-out profiles the training step on the GPU: give --backend cuda");
#if BRAID_SAMPLES_WITH_CUDA
    // Without a GPU it says so, as every CUDA path does; with one it writes the profile and trains.
    const std::string out = (std::filesystem::temp_directory_path() / ("braid-train-" + std::to_string(getpid()) +
                                                                      ".profile.json")).string();
    const Run profiled = braid_train("--net resnet18 " + tiny + " --backend cuda --profile-out " + out);
    CAPTURE(profiled.output);
    if (profiled.status == 77) {
        CHECK(profiled.output.find("braid-train: no CUDA device") != std::string::npos);
    } else {
        CHECK(profiled.status == 0);
        CHECK(profiled.output.find("wrote " + out) != std::string::npos);
        CHECK(profiled.output.find("iteration 2/2") != std::string::npos);
        CHECK(std::filesystem::exists(out));
        std::filesystem::remove(out);
    }
#endif
}

#ifdef BRAID_PROFILE_PATH
TEST_CASE("braid-profile --net: braid-train's network options, errors before the GPU, exit 77 without one") {
    const auto profile = [](const std::string& args) {
        return braid::testing::run_command(std::string(BRAID_PROFILE_PATH) + " " + args);
    };
    // The files it reads and writes are checked before a GPU is looked for, with or without one.
    check_refusals(BRAID_PROFILE_PATH,
                   {{"--net googlenet --batch 32 --no-aux --profile-out /nonexistent/p.json",
                     "--profile-out: cannot write '/nonexistent/p.json': folder '/nonexistent' does not exist"},
                    {"--plan-out /etc/passwd/plan.json", "--plan-out: cannot write '/etc/passwd/plan.json': '/etc/passwd' is not a folder"},
                    {"--profile-out /tmp", "--profile-out: '/tmp' is a folder; give a file name"},
                    {"--profile-out /tmp/braid-same.json --plan-out /tmp/braid-same.json",
                     "--profile-out and --plan-out are the same file ('/tmp/braid-same.json')"},
                    {"--warmup 010x", "--warmup: expected a whole number, got '010x'"},
                    {"--calibration /nonexistent/c.json", "cannot open '/nonexistent/c.json' for reading"},
                    {"--calibration ''", "--calibration: must not be empty"}});
    const Run small = profile("--net googlenet --image 16");
    CAPTURE(small.output);
    CHECK(small.status == 1);
    CHECK(small.output.find("the smallest image googlenet accepts is 47x47") != std::string::npos);
    const Run demo = profile("--batch 4");
    CAPTURE(demo.output);
    CHECK(demo.status == 2);
    CHECK(demo.output.find("--batch sizes a bundled net; the demo has a fixed size") != std::string::npos);
    const Run demo_api = profile("--conv-api graph");
    CAPTURE(demo_api.output);
    CHECK(demo_api.status == 2);
    CHECK(demo_api.output.find("--conv-api chooses how a bundled net's convolutions run") != std::string::npos);
    const Run demo_bn = profile("--batch-norm cudnn");
    CAPTURE(demo_bn.output);
    CHECK(demo_bn.status == 2);
    CHECK(demo_bn.output.find("--batch-norm chooses how a bundled net's batch norms run") != std::string::npos);
    check_refusals(BRAID_PROFILE_PATH,
                   {{"--net resnet50 --conv-api fast", "--conv-api: fast not in {legacy,graph}"},
                    {"--net resnet50 --batch-norm auto", "--batch-norm: auto not in {own,cudnn}"},
                    {"--net resnet50 --layout auto", "--layout: auto not in {nchw,nhwc}"},
                    {"--layout nhwc", "--layout chooses how a bundled net's activations lie"},
                    {"--warmup 4294967295", "--warmup: expected a whole number from 0 to 100000, got '4294967295'"},
                    {"--warmup 1e3", "--warmup: expected a whole number, got '1e3'"},
                    {"--warmup ''", "--warmup: must not be empty"},
                    {"--max-streams 1024", "--max-streams: expected a whole number from 1 to 128, got '1024'"}});
    // Inception-v3's default is 299x299 here too: 224 would fail to build before any GPU is looked for.
    const std::filesystem::path v3_out =
        std::filesystem::temp_directory_path() / ("braid-cli-v3-" + std::to_string(getpid()) + ".profile.json");
    const Run v3 = profile("--net inception_v3 --batch 1 --width-scale 0.125 --iters 1 --warmup 1 --profile-out " +
                           v3_out.string() + " --plan-out " + v3_out.string() + ".plan.json");
    CAPTURE(v3.output);
    CHECK(v3.output.find("smallest image") == std::string::npos);
    if (v3.status == 77) CHECK(v3.output.find("no CUDA device") != std::string::npos);
    else CHECK(v3.status == 0);  // with a GPU: a small profile, written
    std::filesystem::remove(v3_out);
    std::filesystem::remove(v3_out.string() + ".plan.json");
    const Run v3_small = profile("--net inception_v3 --image 224");
    CAPTURE(v3_small.output);
    CHECK(v3_small.status == 1);
    CHECK(v3_small.output.find("the smallest image inception_v3 accepts is 299x299") != std::string::npos);
    const Run unknown = profile("--net alexnet");
    CAPTURE(unknown.output);
    CHECK(unknown.status != 0);
    CHECK(unknown.output.find("alexnet not in {demo,googlenet,resnet18") != std::string::npos);
}
#endif

#ifdef BRAID_PLAN_PATH
// The loop without a GPU, on the profiles measured on the H200: braid-plan
// plans each one, and braid-train loads the plan against the training graph
// it builds for the same net (--dry-run: loaded, validated, not trained).
TEST_CASE("profile -> braid-plan --profile -> braid-train --strategy plan.json, with the H200 profiles") {
    struct Case {
        const char* profile;
        const char* net;
        braid::samples::NetConfig config;
    };
    const auto config = [](const char* net, std::uint32_t batch, bool aux) {
        braid::samples::NetConfig c;
        c.net = net;
        c.batch = batch;
        c.aux_classifiers = aux;
        return c;
    };
    const Case cases[] = {
        {"googlenet-noaux-b8", "--net googlenet --no-aux --batch 8", config("googlenet", 8, false)},
        {"googlenet-noaux-b32", "--net googlenet --no-aux --batch 32", config("googlenet", 32, false)},
        {"resnet50-b8", "--net resnet50 --batch 8", config("resnet50", 8, true)},
        {"resnet50-b32", "--net resnet50 --batch 32", config("resnet50", 32, true)},
    };
    const std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("braid-loop-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir);
    std::map<std::string, std::string> fingerprint_of;
    for (const Case& c : cases) {
        CAPTURE(c.profile);
        const std::string profile = std::string(BRAID_SOURCE_DIR) + "/tests/data/h200/" + c.profile + ".profile.json";
        const std::string plan = (dir / (std::string(c.profile) + ".plan.json")).string();
        // The graph the profile ran is the one braid builds for that net today.
        braid::samples::TrainConfig tc;
        tc.model = c.config;
        const std::string built = braid::samples::build_training_graph(tc).graph.fingerprint();
        CHECK(braid::load_profile(profile).graph_fingerprint == built);
        fingerprint_of[c.profile] = built;

        const Run planned = braid::testing::run_command(std::string(BRAID_PLAN_PATH) + " --profile " + profile +
                                                        " --out " + dir.string() + " --plan-out " + plan);
        CAPTURE(planned.output);
        REQUIRE(planned.status == 0);
        const Run dry = braid_train(std::string(c.net) + " --strategy " + plan + " --dry-run");
        CAPTURE(dry.output);
        CHECK(dry.status == 0);
        CHECK(dry.output.find("plan 'braid' (for h200) fits graph " + built) != std::string::npos);
    }
    // A plan for the net at another batch size is another graph: refused, both fingerprints named.
    const Run other = braid_train("--net resnet50 --batch 32 --strategy " + (dir / "resnet50-b8.plan.json").string() +
                                  " --dry-run");
    CAPTURE(other.output);
    CHECK(other.status == 1);
    CHECK(other.output.find("this plan was made for graph " + fingerprint_of["resnet50-b8"]) != std::string::npos);
    CHECK(other.output.find("not for this graph " + fingerprint_of["resnet50-b32"]) != std::string::npos);
    std::filesystem::remove_all(dir);
}
#endif

#ifdef BENCH_GPU_TRAIN_PATH
// tools/gpu-check runs bench-gpu-train on a lent GPU, where a mistyped row
// would cost device minutes: it refuses bad options on any machine, before
// it asks for a device, naming the option.
TEST_CASE("bench-gpu-train refuses bad options before it looks for a GPU") {
    const auto bench = [](const std::string& args) {
        return braid::testing::run_command(std::string(BENCH_GPU_TRAIN_PATH) + " " + args);
    };
    const Run help = bench("--help");
    CHECK(help.status == 0);
    CHECK(help.output.find("--update-bucket-mib") != std::string::npos);
    CHECK(help.output.find("--conv-api") != std::string::npos);
    CHECK(help.output.find("--batch-norm") != std::string::npos);
    CHECK(help.output.find("--pdl") != std::string::npos);
    check_refusals(BENCH_GPU_TRAIN_PATH, {
             {"--nets resnet50,vgg16", "--nets: vgg16 not in"},
             {"--batches 8,0", "--batches"},
             {"--batch x", "--batches"},
             {"--iters 0", "--iters"},
             {"--fuse-relu 2", "--fuse-relu"},
             {"--share-bn-sums yes", "--share-bn-sums"},
             {"--update-bucket-mib 1073741825", "--update-bucket-mib"},
             {"--conv-api frontend", "--conv-api: frontend not in {legacy,graph}"},
             {"--batch-norm fused", "--batch-norm: fused not in {own,cudnn}"},
             {"--layout chw", "--layout: chw not in {nchw,nhwc}"},
             {"--pdl auto", "--pdl: auto not in {off,on}"},
             {"--width-scale -1", "--width-scale"},
             {"--width-scale nan", "--width-scale: expected a number, got 'nan'"},
             {"--tune-budget nan", "--tune-budget: expected a number, got 'nan'"},
             {"--frobnicate 1", "--frobnicate"},
             {"--nets", "--nets"}});
}
#endif

#ifdef BENCH_GPU_CONV_PATH
TEST_CASE("bench-gpu-conv refuses bad options before it looks for a GPU, and skips without one") {
    const auto bench = [](const std::string& args) {
        return braid::testing::run_command(std::string(BENCH_GPU_CONV_PATH) + " " + args);
    };
    check_refusals(BENCH_GPU_CONV_PATH, {
             {"--nets resnet50,vgg16", "--nets: vgg16 not in"},
             {"--batch 0", "--batch"},
             {"--rounds 0", "--rounds"},
             {"--reps x", "--reps"},
             {"--workspace-mib -1", "--workspace-mib"},
             {"--tf32 maybe", "--tf32"},
             {"--tf32 2", "--tf32: must be 0 or 1, got '2'"},
             {"--deterministic true", "--deterministic: must be 0 or 1, got 'true'"}});
    const Run ok = bench("--nets resnet18 --batch 2 --image 64 --rounds 1 --reps 1");
    CAPTURE(ok.output);
    if (ok.status == 77) CHECK(ok.output.find("no CUDA device") != std::string::npos);
    else CHECK(ok.status == 0);  // with a GPU: it runs
}
#endif

#ifdef BRAID_MEASURE_PATH
// braid-measure checks every row (networks, kernel settings, plan files
// against the graphs braid builds) before it looks for a GPU.
TEST_CASE("braid-measure: a fresh data set from profiles, its rows checked before any GPU time") {
    const std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("braid-measure-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir / "out");
    const std::string data = std::string(BRAID_SOURCE_DIR) + "/tests/data/h200/";
    const auto measure = [](const std::string& args) {
        return braid::testing::run_command(std::string(BRAID_MEASURE_PATH) + " " + args);
    };
    // An empty output (an unset shell variable) is an error before any GPU is looked for, not a skip.
    const Run empty = measure(data + "measurements.json -o ''");
    CAPTURE(empty.output);
    CHECK(empty.status != 0);
    CHECK(empty.status != 77);
    CHECK(empty.output.find("--measurements-out: must not be empty") != std::string::npos);
    // The H200 data set's profiles predate run settings: no network to rebuild.
    const Run old = measure("--profiles " + data + "resnet50-b8.profile.json -o " + (dir / "out/m.json").string());
    CHECK(old.status == 1);
    CHECK(old.output.find("names no bundled network in its run settings") != std::string::npos);
    // The same profile saying what it ran (as braid-profile --net writes it), with a plan beside it.
    nlohmann::json profile = braid::detail::load_json_file(data + "resnet50-b8.profile.json");
    profile["run"]["settings"] = {{"net", "resnet50"}, {"batch", 8}, {"image", 224}, {"classes", 1000}};
    std::ofstream(dir / "r8.profile.json") << profile.dump();
    const Run plan = braid_train("--net resnet50 --batch 8 --strategy braid --dry-run --plan-out " +
                                 (dir / "r8.plan.json").string());
    REQUIRE(plan.status == 0);
    const Run fresh = measure("--profiles " + (dir / "r8.profile.json").string() + " --rounds 1 -o " +
                              (dir / "out/m.json").string());
    CAPTURE(fresh.output);
    CHECK(fresh.output.find("serial, nimble and ../r8.plan.json, graph and eager") != std::string::npos);
    // Nimble's chains with critical-path priorities, written beside the output for a graph-mode row.
    CHECK(fresh.output.find("r8.nimble-critical-path.plan.json, graph mode") != std::string::npos);
    const nlohmann::json urgent = braid::detail::load_json_file((dir / "out/r8.nimble-critical-path.plan.json").string());
    CHECK(urgent.at("strategy") == "nimble");
    std::map<int, int> priorities;  // priority -> streams
    for (const nlohmann::json& st : urgent.at("streams")) ++priorities[st.at("priority").get<int>()];
    CHECK(priorities.size() == 2);
    CHECK(priorities[-1] >= 1);
    CHECK(priorities[0] > priorities[-1]);
    if (fresh.status == 77) {
        CHECK(fresh.output.find("no CUDA device") != std::string::npos);
    } else {  // with a GPU: seven rows written, their files named relative to the file
        REQUIRE(fresh.status == 0);
        const braid::MeasurementSet m = braid::load_measurements((dir / "out/m.json").string());
        CHECK(m.rows.size() == 7);
        for (const braid::MeasuredRow& row : m.rows) {
            CHECK(std::filesystem::is_regular_file(m.folder / row.profile));
            if (row.plan != "serial" && row.plan != "nimble") CHECK(std::filesystem::is_regular_file(m.folder / row.plan));
        }
    }
    // Two profiles of one file name would make one plan file: refused before either is written.
    std::filesystem::create_directories(dir / "a");
    std::filesystem::create_directories(dir / "b");
    std::filesystem::copy_file(dir / "r8.profile.json", dir / "a/same.profile.json");
    std::filesystem::copy_file(dir / "r8.profile.json", dir / "b/same.profile.json");
    const Run same = measure("--profiles " + (dir / "a/same.profile.json").string() + "," +
                             (dir / "b/same.profile.json").string() + " -o " + (dir / "out/same.json").string());
    CAPTURE(same.output);
    CHECK(same.status == 1);
    CHECK(same.output.find("--profiles: '" + (dir / "a/same.profile.json").string() + "' and '" +
                           (dir / "b/same.profile.json").string() + "' would both make the plan '") != std::string::npos);
    CHECK(!std::filesystem::exists(dir / "out/same.nimble-critical-path.plan.json"));
    // The file written may not be one it reads: the profile, its plan, or the measurements.
    for (const std::string& input : {std::string("r8.profile.json"), std::string("r8.plan.json")}) {
        const Run over = measure("--profiles " + (dir / "r8.profile.json").string() + " --rounds 1 -o " + (dir / input).string());
        CAPTURE(over.output);
        CHECK(over.status == 1);
        CHECK(over.output.find("--measurements-out and ") != std::string::npos);
        CHECK(over.output.find("are the same file ('" + (dir / input).string() + "')") != std::string::npos);
    }
    // Kernel settings are measured as profiled; a value braid has no kernels for is refused.
    profile["run"]["settings"]["conv_api"] = "frontend";
    std::ofstream(dir / "k.profile.json") << profile.dump();
    const Run kernels = measure("--profiles " + (dir / "k.profile.json").string() + " -o " + (dir / "out/m.json").string());
    CHECK(kernels.status == 1);
    CHECK(kernels.output.find("measurements row 0 ('serial'): kernel setting 'conv_api' is 'frontend'") !=
          std::string::npos);
    CHECK(!std::filesystem::exists(dir / "out/k.nimble-critical-path.plan.json"));  // nothing made for a refused run
    // A row of a data set that asks for other kernels than its profile ran is refused, both named.
    nlohmann::json rows = {{"format", "braid.measurements"},
                           {"version", 1},
                           {"device", {{"name", profile["device"]["name"]}}},
                           {"rows",
                            {{{"label", "serial"},
                              {"profile", "r8.profile.json"},
                              {"plan", "serial"},
                              {"mode", "graph"},
                              {"network", {{"net", "resnet50"}, {"batch", 8}, {"conv_api", "graph"}}},
                              {"ms", {12.0}}}}}};
    std::ofstream(dir / "rows.json") << rows.dump();
    const Run other = measure((dir / "rows.json").string() + " -o " + (dir / "out/m.json").string());
    CAPTURE(other.output);
    CHECK(other.status == 1);
    CHECK(other.output.find("measurements row 0 ('serial'): its kernel settings (conv_api graph, batch_norm own, "
                            "layout nchw) are not the ones profile") != std::string::npos);
    CHECK(other.output.find("ran with (conv_api legacy, batch_norm own, layout nchw)") != std::string::npos);
    const Run onto_itself = measure((dir / "rows.json").string() + " -o " + (dir / "rows.json").string());
    CAPTURE(onto_itself.output);
    CHECK(onto_itself.status == 1);
    CHECK(onto_itself.output.find("--measurements-out and the measurements file are the same file ('" +
                                  (dir / "rows.json").string() + "')") != std::string::npos);
    // A plan made for another graph is refused, naming the row.
    std::filesystem::copy_file(data + "plans/googlenet-noaux-b32-braid-roofline-graph.plan.json", dir / "r8.plan.json",
                               std::filesystem::copy_options::overwrite_existing);
    const Run foreign = measure("--profiles " + (dir / "r8.profile.json").string() + " -o " + (dir / "out/m.json").string());
    CHECK(foreign.status == 1);
    CHECK(foreign.output.find("measurements row 2 ('braid-profile')") != std::string::npos);
    CHECK(foreign.output.find("make a new plan for it") != std::string::npos);
    // Nowhere to write, no input, both inputs.
    const Run nowhere = measure("--profiles " + (dir / "r8.profile.json").string() + " -o " + (dir / "no/m.json").string());
    CHECK(nowhere.status == 1);
    CHECK(nowhere.output.find("no folder") != std::string::npos);
    const Run none = measure("");
    CHECK(none.status != 0);
    CHECK(none.output.find("a measurements file or --profiles is required") != std::string::npos);
    const Run both = measure(data + "measurements.json --profiles " + (dir / "r8.profile.json").string());
    CHECK(both.status != 0);
    CHECK(both.output.find("excludes") != std::string::npos);
    const Run twice = measure("--profiles " + (dir / "r8.profile.json").string() + "," + (dir / "r8.profile.json").string() +
                              " -o " + (dir / "out/m.json").string());
    CHECK(twice.status == 1);
    CHECK(twice.output.find("lists '" + (dir / "r8.profile.json").string() + "' twice") != std::string::npos);
    // Profiles of two GPUs are not one data set.
    profile["run"]["settings"].erase("conv_api");
    profile["device"]["key"] = "h100";
    profile["device"]["name"] = "NVIDIA H100 80GB HBM3";
    std::ofstream(dir / "h100.profile.json") << profile.dump();
    const Run two_gpus = measure("--profiles " + (dir / "r8.profile.json").string() + "," +
                                 (dir / "h100.profile.json").string() + " -o " + (dir / "out/m.json").string());
    CAPTURE(two_gpus.output);
    CHECK(two_gpus.status == 1);
    CHECK(two_gpus.output.find("h100.profile.json' ran on NVIDIA H100 80GB HBM3, '" + (dir / "r8.profile.json").string() +
                               "' on NVIDIA H200: one data set is of one GPU") != std::string::npos);
    // A plan it makes may not land on a file it reads through a link: refused, the profile left a profile.
    std::filesystem::create_directories(dir / "linked");
    std::filesystem::copy_file(dir / "r8.profile.json", dir / "linked/g.profile.json");
    std::filesystem::create_symlink("g.profile.json", dir / "linked/g.nimble-critical-path.plan.json");
    const Run linked = measure("--profiles " + (dir / "linked/g.profile.json").string() + " -o " +
                               (dir / "linked/m.json").string());
    CAPTURE(linked.output);
    CHECK(linked.status == 1);
    CHECK(linked.output.find("the plan made from '" + (dir / "linked/g.profile.json").string() + "' and profile ") !=
          std::string::npos);
    CHECK(braid::detail::load_json_file((dir / "linked/g.profile.json").string()).at("format") == "braid.profile");
    std::filesystem::remove_all(dir);
}
#endif

}  // TEST_SUITE

#endif
