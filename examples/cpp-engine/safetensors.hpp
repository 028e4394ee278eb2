// safetensors.hpp: a minimal reader of a .safetensors file's bf16 tensors.
//
// The format: an 8-byte little-endian header length N, N bytes of JSON
// ({name: {"dtype", "shape", "data_offsets": [begin, end]}, optional
// "__metadata__"}), then the data section; offsets are relative to it.
// Only what the reference engine needs: BF16 tensors, read whole into
// memory, every size checked against the file before anything is read.
#pragma once

#include <cstdint>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace offcard {

struct Tensor {
    std::vector<int64_t> shape;
    std::vector<uint16_t> data;  // bf16 bit patterns, row-major
};

class SafeTensors {
public:
    explicit SafeTensors(const std::string& path) : path_(path), f_(path, std::ios::binary) {
        if (!f_) throw std::runtime_error(path + ": cannot open");
        f_.seekg(0, std::ios::end);
        const uint64_t size = static_cast<uint64_t>(f_.tellg());
        f_.seekg(0);
        unsigned char len[8];
        if (size < 8 || !f_.read(reinterpret_cast<char*>(len), 8)) throw std::runtime_error(path + ": shorter than its 8-byte header length");
        uint64_t n = 0;
        for (int i = 7; i >= 0; i--) n = n << 8 | len[i];
        if (n > size - 8) throw std::runtime_error(path + ": header of " + std::to_string(n) + " bytes in a file of " + std::to_string(size));
        std::string head(n, '\0');
        if (!f_.read(&head[0], static_cast<std::streamsize>(n))) throw std::runtime_error(path + ": cannot read the header");
        data_ = 8 + n;
        dataSize_ = size - data_;
        header_ = nlohmann::json::parse(head);
        if (!header_.is_object()) throw std::runtime_error(path + ": header is not a JSON object");
    }

    bool has(const std::string& name) const { return header_.contains(name) && name != "__metadata__"; }

    // read loads a BF16 tensor and checks its shape against want.
    Tensor read(const std::string& name, const std::vector<int64_t>& want) {
        if (!has(name)) throw std::runtime_error(path_ + ": no tensor " + name);
        const auto& t = header_.at(name);
        const std::string dtype = t.at("dtype").get<std::string>();
        if (dtype != "BF16") throw std::runtime_error(path_ + ": " + name + " is " + dtype + ", want BF16");
        Tensor out;
        out.shape = t.at("shape").get<std::vector<int64_t>>();
        if (out.shape != want) throw std::runtime_error(path_ + ": " + name + " has shape " + t.at("shape").dump() + ", want " + nlohmann::json(want).dump());
        uint64_t count = 1;
        for (int64_t d : out.shape) count *= static_cast<uint64_t>(d);
        const auto off = t.at("data_offsets").get<std::vector<uint64_t>>();
        if (off.size() != 2 || off[0] > off[1] || off[1] > dataSize_ || off[1] - off[0] != 2 * count)
            throw std::runtime_error(path_ + ": " + name + ": data_offsets " + t.at("data_offsets").dump() + " do not fit its shape and the file");
        out.data.resize(count);
        std::vector<unsigned char> raw(2 * count);
        f_.seekg(static_cast<std::streamoff>(data_ + off[0]));
        if (!f_.read(reinterpret_cast<char*>(raw.data()), static_cast<std::streamsize>(raw.size())))
            throw std::runtime_error(path_ + ": " + name + ": short read");
        for (uint64_t i = 0; i < count; i++) out.data[i] = static_cast<uint16_t>(raw[2 * i] | raw[2 * i + 1] << 8);
        return out;
    }

private:
    std::string path_;
    std::ifstream f_;
    nlohmann::json header_;
    uint64_t data_ = 0, dataSize_ = 0;
};

}  // namespace offcard
