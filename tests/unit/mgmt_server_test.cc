// mgmt_server_test.cc - the control socket: framing, versioning, errors, hostile clients.
#include <gtest/gtest.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
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
  EXPECT_EQ(server_.clients(), 64u);
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
