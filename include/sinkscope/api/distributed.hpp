// Runs of one command over several processes (DESIGN.md api: distributed runs), on c10d from
// libtorch: a TCPStore for the rendezvous and a Gloo process group for the collectives. Torch-free
// header; every c10d include stays in src/api/torch/distributed.cpp.
//
// Configured the torchrun way (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) or by flags, which
// win over the environment. A world of one process connects nothing.
//
// Failure of one rank: a rank whose command throws posts its message in the store before it
// exits; every rank runs a watchdog thread that posts a heartbeat every second and reads the
// others'. A posted failure, a heartbeat silent for `timeout_s` seconds (a killed rank) or a lost
// connection to the store (rank 0 gone) ends the process at once with one line on stderr and exit
// code 5, whatever the main thread is doing (a long forward pass, a collective).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace sinkscope::api {

// The most processes one run takes: Gloo connects every rank with every other, so a larger world
// is more connections than a machine has ports (a typo such as 1000000 is refused up front).
constexpr int64_t kMaxWorldSize = 65536;

struct DistOptions {
    int64_t world_size = 0;   // --world-size; 0: WORLD_SIZE, else 1
    int64_t rank = -1;        // --rank; -1: RANK, else 0
    std::string master;       // --master HOST:PORT; empty: MASTER_ADDR:MASTER_PORT
    int64_t timeout_s = 300;  // --dist-timeout: connect, collectives, silence of a rank
};

// Flags over the environment; UsageError naming the flag or variable when something is missing
// or out of range (a world above kMaxWorldSize, a rank outside [0, world), a world > 1 without a
// master address).
DistOptions resolve_dist(const DistOptions& flags);

// The shard of `n` items that `rank` of `world` takes: the contiguous range
// [n * rank / world, n * (rank + 1) / world), so the shards in rank order are the items in order.
std::pair<int64_t, int64_t> shard_range(int64_t n, int64_t rank, int64_t world);

// What identifies a model for the ranks' agreement (Communicator::agree), whatever path each node
// keeps it at: the weight files the loader read (model::Model::files) and, for a folder `model`,
// its config.json and tokenizer files, each by name, size and SHA-256 (a file above 64 MiB: of 64
// blocks of 1 MiB spread evenly over it, so that a large checkpoint is not read whole). IoError
// naming the file when one cannot be read.
std::string model_identity(const std::filesystem::path& model,
                           const std::vector<std::filesystem::path>& weight_files);

class Communicator {
public:
    // Connects (a world of one connects nothing): every rank joins at rank 0's store, and the run
    // starts once all `world_size` ranks have; a rank that does not see them all within the
    // timeout (counted from the start, whatever the world size) ends with an IoError saying how
    // many joined. The options must be resolve_dist()'s.
    explicit Communicator(const DistOptions& resolved);
    ~Communicator();
    Communicator(const Communicator&) = delete;
    Communicator& operator=(const Communicator&) = delete;

    int64_t rank() const { return rank_; }
    int64_t world_size() const { return world_; }
    bool distributed() const { return world_ > 1; }

    // Every rank's bytes, in rank order, at rank 0; an empty vector at the other ranks.
    std::vector<std::string> gather(const std::string& bytes);
    // Rank 0's `bytes` at every rank.
    std::string broadcast(const std::string& bytes);
    // Point to point (analyze --split layers): `bytes` to rank `to`, which calls recv(this
    // rank); the length goes first. Messages between two ranks arrive in the order sent.
    void send(const std::string& bytes, int64_t to);
    std::string recv(int64_t from);
    // Element-wise sum over the ranks, added in rank order at rank 0 and sent back, so the result
    // is the same bits whatever the timing (every rank passes the same length).
    void all_reduce_sum(std::vector<double>& values);
    void barrier();
    // Every rank's `fingerprint` (what its run depends on: options, a hash of its data, the
    // model's identity; key "rank" is ignored) and the sinkscope version must equal rank 0's:
    // called by every rank before it writes anything. When one differs, every rank throws the
    // same one-line UsageError naming the first difference (lowest rank, first key), so all
    // refuse and none leaves a folder; rank 0 waits until every rank has read the fingerprints.
    void agree(const nlohmann::json& fingerprint);

    // This rank failed with `message`: posted for the others' watchdogs (best effort, no throw).
    void report_failure(const std::string& message) noexcept;
    // The end of one command's run, called by every rank after its last collective: rank 0 once
    // its outputs are committed. Ranks other than 0 wait for rank 0's commit (watched, so a
    // failure of rank 0 is still reported); rank 0 waits until every rank has seen it. With
    // `last` the watchdogs stop (the processes end); without, the ranks go on to another run over
    // the same communicator (dynamics: one run per checkpoint).
    void finish(bool last = true);

    // Runs `body`; an exception escaping it is posted for the other ranks, then rethrown.
    template <typename F>
    auto guarded(F&& body) -> decltype(body()) {
        try {
            return body();
        } catch (const std::exception& e) {
            report_failure(e.what());
            throw;
        }
    }

private:
    struct Impl;
    int64_t rank_ = 0, world_ = 1;
    bool refused_together_ = false;  // agree() failed at every rank: nothing to post
    std::unique_ptr<Impl> impl_;
};

// Runs `body(comm)` with `given`, or with a Communicator connected from `flags` (one process
// when they and the environment say nothing); an exception escaping it is posted to the others.
template <typename F>
auto with_communicator(const DistOptions& flags, Communicator* given, F&& body) {
    std::unique_ptr<Communicator> own;
    if (!given) own = std::make_unique<Communicator>(resolve_dist(flags));
    Communicator& comm = given ? *given : *own;
    return comm.guarded([&] { return body(comm); });
}

// Where `rank` stages: rank 0 the output `out` itself; another rank keeps its shard's state in
// the sibling "<out>.rank<k>" (staged as "<out>.rank<k>.partial", on its own node's file system),
// which only holds state for --resume and is never committed.
std::filesystem::path rank_output(const std::filesystem::path& out, int64_t rank);

// A rank other than 0 once rank 0 has its shard's state: waits for rank 0's commit
// (finish(last)), then removes its staging folder `staging`.
void end_rank(Communicator& comm, const std::filesystem::path& staging, bool last = true);

}  // namespace sinkscope::api
