// mgmt_server_test.cc - the control socket: framing, versioning, errors, hostile clients.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "management.h"
#include "mgmt_protocol.h"
#include "mgmt_server.h"

namespace cleave::dp {
namespace {

using nlohmann::json;

class MgmtServerTest : public ::testing::Test {
 protected:
  MgmtServerTest()
      : path_("/tmp/cleave-mgmt-test-" + std::to_string(getpid()) + ".sock"),
        epoll_(epoll_create1(EPOLL_CLOEXEC)),
        server_(path_, epoll_, [this](std::string_view cmd, const json& args) {
          calls_++;
          if (cmd == "echo") return args;
          if (cmd == "boom") throw std::runtime_error("kaboom");
          throw MgmtError(mgmt::kErrUnknownCommand, "unknown command '" + std::string(cmd) + "'");
        }) {}
  ~MgmtServerTest() override { close(epoll_); }

  json ask(const std::string& line) { return json::parse(server_.answer(line)); }

  // Runs the server's event loop until nothing happens for a while.
  void pump(int idle_ms = 50) {
    epoll_event evs[8];
    for (;;) {
      int n = epoll_wait(epoll_, evs, 8, idle_ms);
      if (n <= 0) return;
      for (int i = 0; i < n; i++)
        server_.on_event(evs[i].data.fd, evs[i].events);
    }
  }
  int connect_client() {
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path_.c_str());
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    return fd;
  }
  // A connection while the server is not being pumped: a full backlog is drained first.
  int connect_nonblocking() {
    for (;;) {
      int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
      sockaddr_un a{};
      a.sun_family = AF_UNIX;
      std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path_.c_str());
      if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) return fd;
      EXPECT_EQ(errno, EAGAIN);
      close(fd);
      pump_once();
    }
  }
  // One round of the event loop, at most one event per fd, as the daemon's loop runs it.
  int pump_once(int timeout_ms = 0) {
    epoll_event evs[64];
    int n = epoll_wait(epoll_, evs, 64, timeout_ms);
    for (int i = 0; i < n; i++)
      server_.on_event(evs[i].data.fd, evs[i].events);
    return n;
  }
  // Reads answers from fd until `n` lines came (the server pumped meanwhile).
  std::vector<json> read_answers(int fd, size_t n) {
    std::vector<json> out;
    std::string buf;
    char chunk[65536];
    while (out.size() < n) {
      pump_once(10);
      ssize_t r = recv(fd, chunk, sizeof chunk, MSG_DONTWAIT);
      if (r == 0) break;
      if (r > 0) buf.append(chunk, size_t(r));
      for (size_t nl; (nl = buf.find('\n')) != std::string::npos;) {
        out.push_back(json::parse(buf.substr(0, nl)));
        buf.erase(0, nl + 1);
      }
    }
    return out;
  }
  std::string read_all(int fd) {
    std::string out;
    char buf[4096];
    timeval tv{0, 200000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;)
      out.append(buf, size_t(n));
    return out;
  }

  std::string path_;
  int epoll_;
  int calls_ = 0;
  MgmtServer server_;
};

TEST_F(MgmtServerTest, AnswersWithResultAndId) {
  json a = ask(R"({"version":1,"id":42,"command":"echo","args":{"x":1}})");
  EXPECT_EQ(a["version"], 1);
  EXPECT_EQ(a["id"], 42);
  EXPECT_EQ(a["ok"], true);
  EXPECT_EQ(a["result"]["x"], 1);
}

TEST_F(MgmtServerTest, ArgsAndIdAreOptional) {
  json a = ask(R"({"version":1,"command":"echo"})");
  EXPECT_EQ(a["ok"], true);
  EXPECT_TRUE(a["id"].is_null());
  EXPECT_TRUE(a["result"].is_object());
}

TEST_F(MgmtServerTest, RejectsBadRequests) {
  struct Case {
    const char* line;
    const char* code;
  } cases[] = {
      {"not json", "bad_request"},
      {"[1,2]", "bad_request"},
      {R"({"command":"echo"})", "bad_request"},
      {R"({"version":"1","command":"echo"})", "bad_request"},
      {R"({"version":1})", "bad_request"},
      {R"({"version":1,"command":7})", "bad_request"},
      {R"({"version":1,"command":"echo","args":[1]})", "bad_request"},
      {R"({"version":2,"command":"echo"})", "unsupported_version"},
      {R"({"version":1,"command":"nope"})", "unknown_command"},
      {R"({"version":1,"command":"boom"})", "internal"},
  };
  for (const Case& c : cases) {
    json a = ask(c.line);
    EXPECT_EQ(a["ok"], false) << c.line;
    EXPECT_EQ(a["error"]["code"], c.code) << c.line;
    EXPECT_FALSE(a["error"]["message"].get<std::string>().empty()) << c.line;
  }
  EXPECT_EQ(calls_, 2);  // only "nope" and "boom" reached the handler
}

TEST_F(MgmtServerTest, InvalidUtf8NeverThrows) {
  std::string line = "{\"version\":1,\"command\":\"\xff\xfe\"}";
  json a = ask(line);
  EXPECT_EQ(a["ok"], false);
}

TEST_F(MgmtServerTest, RandomBytesAlwaysGetAWellFormedAnswer) {
  std::mt19937 rng(7);
  const std::string valid = R"({"version":1,"id":3,"command":"echo","args":{"a":[1,"x"]}})";
  for (int i = 0; i < 5000; i++) {
    std::string line = valid;
    if (i % 2 == 0) {
      for (int k = 1 + int(rng() % 4); k > 0; k--)
        line[rng() % line.size()] = char(rng() % 256);
    } else {
      line.resize(rng() % 200);
      for (char& c : line)
        c = char(rng() % 256);
    }
    json a;
    ASSERT_NO_THROW(a = json::parse(server_.answer(line)));
    ASSERT_TRUE(a.is_object());
    ASSERT_EQ(a["version"], 1);
    ASSERT_TRUE(a["ok"].is_boolean());
    if (!a["ok"].get<bool>()) {
      ASSERT_TRUE(a["error"]["message"].is_string());
    }
  }
}

TEST_F(MgmtServerTest, SeveralRequestsOnOneConnectionAnswerInOrder) {
  int fd = connect_client();
  pump();
  std::string two = R"({"version":1,"id":1,"command":"echo","args":{"n":1}})"
                    "\n"
                    R"({"version":1,"id":2,"command":"echo","args":{"n":2}})"
                    "\n";
  ASSERT_EQ(send(fd, two.data(), two.size(), 0), ssize_t(two.size()));
  shutdown(fd, SHUT_WR);
  pump();
  std::string out = read_all(fd);
  size_t nl = out.find('\n');
  ASSERT_NE(nl, std::string::npos);
  EXPECT_EQ(json::parse(out.substr(0, nl))["id"], 1);
  EXPECT_EQ(json::parse(out.substr(nl + 1))["id"], 2);
  pump();
  EXPECT_EQ(server_.clients(), 0u);  // closed after answering a half-closed client
  close(fd);
}

TEST_F(MgmtServerTest, OversizedRequestIsRefusedAndDropped) {
  int fd = connect_client();
  pump();
  std::string big(mgmt::kMaxRequestBytes + 100, 'x');
  send(fd, big.data(), big.size(), MSG_NOSIGNAL);
  pump();
  std::string out = read_all(fd);
  json a = json::parse(out.substr(0, out.find('\n')));
  EXPECT_EQ(a["error"]["code"], "bad_request");
  EXPECT_EQ(server_.clients(), 0u);
  close(fd);
}

TEST_F(MgmtServerTest, ClientThatVanishesIsCleanedUp) {
  for (int i = 0; i < 10; i++)
    close(connect_client());
  pump();
  EXPECT_EQ(server_.clients(), 0u);
}

TEST_F(MgmtServerTest, IdleClientsMakeRoomForNewOnes) {
  std::vector<int> idle;
  for (int i = 0; i < 80; i++) {
    idle.push_back(connect_client());
    pump(1);
  }
  // All of one uid: its cap holds them, the oldest idle making room for each newcomer.
  EXPECT_EQ(server_.clients(), MgmtLimits{}.clients.per_uid);
  EXPECT_EQ(server_.stats()["evicted"], 80 - MgmtLimits{}.clients.per_uid);
  int fd = connect_client();
  pump();
  std::string req = R"({"version":1,"id":9,"command":"echo"})"
                    "\n";
  send(fd, req.data(), req.size(), 0);
  pump();
  std::string out = read_all(fd);
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(json::parse(out.substr(0, out.find('\n')))["ok"], true);
  close(fd);
  for (int c : idle)
    close(c);
}

TEST_F(MgmtServerTest, StreamAfterACompleteLineIsStillLimited) {
  // One complete request, then as many bytes without a newline as the socket holds: the limit
  // holds on every read, so the turn that reads them refuses the connection, having read no
  // more than one request's worth past the line.
  int fd = connect_client();
  pump();
  fcntl(fd, F_SETFL, O_NONBLOCK);
  std::string first = R"({"version":1,"id":1,"command":"echo"})"
                      "\n";
  ASSERT_EQ(send(fd, first.data(), first.size(), 0), ssize_t(first.size()));
  std::string chunk(4096, 'x');
  size_t queued = 0;
  for (ssize_t n; (n = send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL)) > 0;)
    queued += size_t(n);
  ASSERT_GT(queued, 2 * mgmt::kMaxRequestBytes);
  pump_once(100);  // one turn
  EXPECT_EQ(server_.clients(), 0u) << "a line past the limit was read and kept";
  std::string out = read_all(fd);
  size_t nl = out.find('\n');
  ASSERT_NE(nl, std::string::npos);
  EXPECT_EQ(json::parse(out.substr(0, nl))["id"], 1);
  ASSERT_GT(out.size(), nl + 1);
  json refusal = json::parse(out.substr(nl + 1, out.find('\n', nl + 1) - nl - 1));
  EXPECT_EQ(refusal["error"]["code"], "bad_request");
  EXPECT_NE(refusal["error"]["message"].get<std::string>().find("longer than 65536"),
            std::string::npos);
  EXPECT_EQ(server_.stats()["oversized"], 1);
  close(fd);
}

TEST_F(MgmtServerTest, ARequestOfExactlyTheLimitIsServed) {
  int fd = connect_client();
  pump();
  std::string head = R"({"version":1,"id":5,"command":"echo","args":{"p":")";
  std::string tail = R"("}})";
  std::string line =
      head + std::string(mgmt::kMaxRequestBytes - head.size() - tail.size(), 'a') + tail + "\n";
  ASSERT_EQ(line.size(), mgmt::kMaxRequestBytes + 1);
  std::thread writer([&] { send(fd, line.data(), line.size(), MSG_NOSIGNAL); });
  std::vector<json> a = read_answers(fd, 1);
  writer.join();
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0]["ok"], true);
  EXPECT_EQ(server_.stats()["oversized"], 0);
  close(fd);
}

TEST_F(MgmtServerTest, ManyTinyRequestsAreServedInTurns) {
  // A client with thousands of requests buffered gets at most requests_per_turn of them served
  // per turn, and the client after it is answered within a few turns.
  int flood = connect_client();
  int other = connect_client();
  pump();
  fcntl(flood, F_SETFL, O_NONBLOCK);
  std::string req = R"({"version":1,"command":"echo"})"
                    "\n";
  std::string batch;
  for (int i = 0; i < 4096; i++)
    batch += req;
  size_t queued = 0;
  for (ssize_t n; (n = send(flood, batch.data(), batch.size(), MSG_NOSIGNAL)) > 0;)
    queued += size_t(n);
  ASSERT_GT(queued / req.size(), 1000u);
  std::string mine = R"({"version":1,"id":"me","command":"echo"})"
                     "\n";
  ASSERT_EQ(send(other, mine.data(), mine.size(), 0), ssize_t(mine.size()));
  calls_ = 0;
  epoll_event evs[64];
  int n = epoll_wait(epoll_, evs, 64, 100);
  for (int i = 0; i < n; i++) {
    int before = calls_;
    server_.on_event(evs[i].data.fd, evs[i].events);
    EXPECT_LE(calls_ - before, 16) << "one turn served more than requests_per_turn";
  }
  std::vector<json> a = read_answers(other, 1);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0]["id"], "me");
  EXPECT_LT(size_t(calls_), queued / req.size()) << "the flood was served whole first";
  EXPECT_GT(server_.stats()["deferred"].get<uint64_t>(), 0u);
  close(flood);
  close(other);
}

TEST_F(MgmtServerTest, AClientThatDoesNotReadIsNotReadFrom) {
  // Pipelined requests whose answers are not taken: the server stops reading at its high-water
  // mark instead of buffering answers without bound, and resumes when the client reads.
  int fd = connect_client();
  pump();
  fcntl(fd, F_SETFL, O_NONBLOCK);
  std::string req =
      R"({"version":1,"command":"echo","args":{"pad":")" + std::string(900, 'p') + "\"}}\n";
  // Send until the server stops taking requests (the socket stays full while it is pumped),
  // or until the answers would have outgrown what a server may buffer for one client.
  size_t sent = 0;
  for (int blocked = 0; blocked < 200 && sent < mgmt::kMaxAnswerBytes + (size_t{2} << 20);) {
    ssize_t n =
        send(fd, req.data() + sent % req.size(), req.size() - sent % req.size(), MSG_NOSIGNAL);
    if (n > 0) {
      sent += size_t(n);
      blocked = 0;
    } else {
      ASSERT_EQ(errno, EAGAIN) << "the server dropped the client";
      blocked++;
    }
    pump_once(0);
  }
  EXPECT_LT(sent, size_t{8} << 20) << "the server kept reading requests nobody took answers to";
  EXPECT_EQ(server_.clients(), 1u);  // kept, not dropped
  int served = calls_;
  pump();
  EXPECT_EQ(calls_, served) << "requests were served though the answers pile up";
  std::vector<json> a = read_answers(fd, size_t(served));
  EXPECT_GE(a.size(), size_t(served));  // and it resumes as they are taken
  close(fd);
}

TEST_F(MgmtServerTest, ConnectFloodDoesNotEvictAClientSendingItsRequest) {
  int fd = connect_client();
  pump();
  std::string req = R"({"version":1,"id":"slow","command":"echo"})"
                    "\n";
  ASSERT_EQ(send(fd, req.data(), 10, 0), 10);  // half a request, then the flood
  pump();
  std::vector<int> flood;
  for (int i = 0; i < 200; i++)
    flood.push_back(connect_nonblocking());
  pump();
  for (int c : flood)
    close(c);
  pump();
  ASSERT_EQ(send(fd, req.data() + 10, req.size() - 10, MSG_NOSIGNAL), ssize_t(req.size() - 10));
  std::vector<json> a = read_answers(fd, 1);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0]["id"], "slow");
  EXPECT_EQ(a[0]["ok"], true);
  json st = server_.stats();
  EXPECT_GT(st["evicted"].get<uint64_t>() + st["reaped"].get<uint64_t>(), 0u);
  close(fd);
}

TEST(LineSplitter, SplitsAndLimitsEveryLine) {
  LineSplitter s(8);
  EXPECT_EQ(s.room(), 9u);
  std::string in = "ab\n\ncdefgh\nij";
  ASSERT_TRUE(s.append(in.data(), in.size()));
  EXPECT_EQ(s.room(), 0u);  // lines wait
  EXPECT_EQ(s.next(), "ab");
  EXPECT_EQ(s.next(), "");
  EXPECT_EQ(s.next(), "cdefgh");
  EXPECT_EQ(s.next(), std::nullopt);
  EXPECT_EQ(s.room(), 7u);  // "ij" plus what completes a line of 8
  ASSERT_TRUE(s.append("klmnop\n", 7));
  EXPECT_EQ(s.next(), "ijklmnop");
  // After a complete line, a line that is too long is still caught, in the same read.
  LineSplitter t(8);
  std::string two = "ok\n123456789";
  EXPECT_FALSE(t.append(two.data(), two.size()));
  LineSplitter u(8);
  std::string inner = "ok\n123456789\nok\n";
  EXPECT_FALSE(u.append(inner.data(), inner.size()));
}

TEST(LineSplitter, AMillionLinesComeOutInOrder) {
  LineSplitter s(64);
  std::string chunk;
  size_t want = 0, got = 0;
  for (int round = 0; round < 100; round++) {
    chunk.clear();
    for (int i = 0; i < 10000; i++)
      chunk += std::to_string(want++) + "\n";
    ASSERT_TRUE(s.append(chunk.data(), chunk.size()));
    while (auto line = s.next()) {
      ASSERT_EQ(*line, std::to_string(got));
      got++;
    }
  }
  EXPECT_EQ(got, 1000000u);
  EXPECT_TRUE(s.empty());
}

TEST(ParseRequest, ChecksTheProtocolWithoutAHandler) {
  json id, args;
  std::string command;
  EXPECT_EQ(
      parse_request(R"({"version":1,"id":3,"command":"x","args":{"a":1}})", id, command, args), "");
  EXPECT_EQ(command, "x");
  EXPECT_EQ(args["a"], 1);
  EXPECT_EQ(id, 3);
  for (const char* bad :
       {"", "{", "[]", R"({"version":1})", R"({"version":1,"command":"x","args":2})"}) {
    std::string error = parse_request(bad, id, command, args);
    ASSERT_FALSE(error.empty()) << bad;
    EXPECT_EQ(json::parse(error)["ok"], false) << bad;
  }
}

TEST_F(MgmtServerTest, SocketFileIsRemovedOnDestruction) {
  EXPECT_EQ(access(path_.c_str(), F_OK), 0);
  {
    MgmtServer other(path_ + "2", epoll_, [](std::string_view, const json&) { return json(); });
    EXPECT_EQ(access((path_ + "2").c_str(), F_OK), 0);
  }
  EXPECT_NE(access((path_ + "2").c_str(), F_OK), 0);
}

}  // namespace
}  // namespace cleave::dp
