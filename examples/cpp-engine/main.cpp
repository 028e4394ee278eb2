// main.cpp: the C++ reference engine behind offcard's line protocol.
//
//     make cpp-engine && offcard check --engine ./build/cpp-engine
//
// Keep this loop and offcard_protocol.hpp; replace Model (model.hpp) with
// your engine (ttnn calls on the card). --exact claims bit-exactness with
// offcard's oracle (full rows then compared bit for bit): this Model
// follows the oracle's op and accumulation order; an engine on a card
// drops the flag and is judged by the tolerance.
#include <cstring>
#include <iostream>
#include <memory>

#include "model.hpp"
#include "offcard_protocol.hpp"

int main(int argc, char** argv) {
    bool exact = false;
    for (int i = 1; i < argc; i++) {
        if (std::strcmp(argv[i], "--exact") == 0) {
            exact = true;
        } else {
            std::cerr << "cpp-engine: unknown argument " << argv[i] << " (usage: cpp-engine [--exact])\n";
            return 2;
        }
    }
    std::ios::sync_with_stdio(false);
    return offcard::serve(std::cin, std::cout, [exact](const offcard::Hello& h, offcard::Caps& caps) {
        caps.engine = "C++ reference (Qwen3 on the CPU)";
        caps.logits = "full";
        caps.exact = exact;
        caps.serves = {"prefill_from", "verify", "copy_blocks"};
        return std::unique_ptr<offcard::Engine>(new offcard::Model(h));
    });
}
