// hello: a greeting passed along the elements of a chare array.
//
// Eight elements of a 1-D array (spread over the PEs by the default block
// map) hand a greeting down the line: element i prints who greeted it and
// greets element i+1. The main function is a coroutine that creates the
// array and sends the first greeting; the last element ends the run. Run as
// several processes, the array spans all of them and each element prints in
// the process that holds it.
#include <cstdio>
#include <string>
#include <weft/weft.hpp>

struct Greeter : weft::array_element<Greeter, int> {  // 1-D index
  void greet(std::string from) {
    std::printf("hello: element %d (PE %d) greeted by %s\n", this_index(), weft::my_pe(),
                from.c_str());
    if (this_index() + 1 < array_size()) {
      this_proxy()[this_index() + 1].send<&Greeter::greet>("element " +
                                                           std::to_string(this_index()));
    } else {
      std::printf("hello: done, %d elements on %d PEs\n", array_size(), weft::num_pes());
      weft::exit(0);
    }
  }
};

int main(int argc, char** argv) {
  return weft::run(argc, argv, [](weft::args) -> weft::task<> {
    auto greeters = weft::array<Greeter>::create(8);
    greeters[0].send<&Greeter::greet>(std::string("main"));
    co_return;
  });
}
