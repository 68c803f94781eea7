#include "server/http/body_decoding.hpp"

#include <zlib.h>

#include <boost/beast/core/string.hpp>

#include "server/api_error.hpp"
#include "server/http/transport.hpp"

namespace flashdeberta::cli::server::http {

namespace {

// Inflated in steps of this size, so the output never passes the limit by more than one step.
constexpr std::size_t kStep = 64 * 1024;

class Inflater {
 public:
  explicit Inflater(int window_bits) {
    if (inflateInit2(&stream_, window_bits) != Z_OK) throw std::bad_alloc();
  }
  ~Inflater() { inflateEnd(&stream_); }
  Inflater(Inflater const&) = delete;
  Inflater& operator=(Inflater const&) = delete;

  // Whether `in` was whole and of the format; throws Refusal 413 past `limit`.
  bool run(std::string const& in, std::string& out, std::size_t limit, std::string_view encoding) {
    stream_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    stream_.avail_in = static_cast<uInt>(in.size());
    for (;;) {
      std::size_t const used = out.size();
      out.resize(used + kStep);
      stream_.next_out = reinterpret_cast<Bytef*>(out.data() + used);
      stream_.avail_out = static_cast<uInt>(kStep);
      int const status = inflate(&stream_, Z_NO_FLUSH);
      out.resize(used + kStep - stream_.avail_out);
      if (out.size() > limit) {
        throw Refusal(kPayloadTooLarge, "the request body inflates (Content-Encoding " + std::string(encoding) +
                                            ") to more than " + std::to_string(limit) +
                                            " bytes, the most a request may hold (--payload-limit)");
      }
      if (status == Z_STREAM_END) {
        if (stream_.avail_in == 0) return true;
        // gzip allows several members one after the other; anything else after the end is not the format.
        if (stream_.next_in[0] != 0x1f || inflateReset(&stream_) != Z_OK) return false;
        continue;
      }
      if (status == Z_BUF_ERROR && stream_.avail_in == 0) return false;  // cut short
      if (status != Z_OK && status != Z_BUF_ERROR) return false;
    }
  }

 private:
  z_stream stream_{};
};

}  // namespace

void decode_content(std::string& body, std::string_view encoding, std::size_t limit) {
  using boost::beast::iequals;
  bool const gzip = iequals(encoding, "gzip") || iequals(encoding, "x-gzip");
  if (!gzip && !iequals(encoding, "deflate")) return;
  std::string out;
  // 16 + 15: gzip's wrapper; 15: zlib's, which HTTP's "deflate" names, though some clients send raw deflate.
  bool whole = Inflater(gzip ? 16 + MAX_WBITS : MAX_WBITS).run(body, out, limit, encoding);
  if (!whole && !gzip) {
    out.clear();
    whole = Inflater(-MAX_WBITS).run(body, out, limit, encoding);
  }
  if (!whole) {
    throw Refusal(kBadRequest, "the request body is not whole " + std::string(encoding) + " data (Content-Encoding)");
  }
  body = std::move(out);
}

}  // namespace flashdeberta::cli::server::http
