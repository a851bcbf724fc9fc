// The main function as a coroutine: weft::run with a function returning
// weft::task<> runs it on PE 0, where it may co_await futures (and through
// them reductions) while the node keeps running messages.
//
//   return weft::run(argc, argv, [](weft::args) -> weft::task<> {
//     auto done = weft::make_future<double>();
//     workers.broadcast<&Worker::start>(weft::callback<double>(done));
//     std::printf("total %g\n", co_await done);
//     weft::exit(0);
//   });
#pragma once
#include <functional>
#include <type_traits>
#include "weft/core/pe.hpp"
#include "weft/core/run.hpp"
#include "weft/core/send.hpp"
#include "weft/objects/coroutine.hpp"
#include "weft/objects/detail/runtime.hpp"

namespace weft {

template <class F>
  requires std::is_same_v<std::invoke_result_t<F&, args>, task<>>
int run(int& argc, char**& argv, F main_fn) {
  // The closure stays inside the node's main_fn for the whole run: a lambda
  // coroutine's frame refers to its captures there.
  return run(argc, argv, std::function<void(args)>([f = std::move(main_fn)](args a) mutable {
               auto h = f(a).release_to_runtime();
               if (h) objects::detail::adopt_task(nullptr, h, h.promise(), "the main function");
             }));
}

template <class F>
  requires std::is_same_v<std::invoke_result_t<F&, args>, task<>>
int run(const runtime_config& config, int argc, char** argv, F main_fn) {
  return run(config, argc, argv,
             std::function<void(args)>([f = std::move(main_fn)](args a) mutable {
               auto h = f(a).release_to_runtime();
               if (h) objects::detail::adopt_task(nullptr, h, h.promise(), "the main function");
             }));
}

}  // namespace weft
