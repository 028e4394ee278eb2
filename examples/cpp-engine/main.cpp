// main.cpp: the C++ reference engine behind offcard's line protocol.
//
//     make cpp-engine && offcard check --engine ./build/cpp-engine
//
// Keep this loop and offcard_protocol.hpp; replace Model (model.hpp) with
// your engine (ttnn calls on the card).
#include <iostream>
#include <memory>

#include "model.hpp"
#include "offcard_protocol.hpp"

int main() {
    std::ios::sync_with_stdio(false);
    return offcard::serve(std::cin, std::cout, [](const offcard::Hello& h, offcard::Caps& caps) {
        caps.engine = "C++ reference (Qwen3 on the CPU)";
        caps.logits = "full";
        return std::unique_ptr<offcard::Engine>(new offcard::Model(h));
    });
}
