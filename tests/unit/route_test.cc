// route_test.cc - longest-prefix match over connected, static and default routes.
#include <gtest/gtest.h>

#include "config.h"
#include "lcore/route.h"

namespace cleave::dp {
namespace {

Config two_ports() {
  ConfigResult r = parse_config(R"(ports:
  - name: p0
    device: d0
    ipv4: 10.0.0.1/24
    gateway: 10.0.0.254
    routes:
      - {dst: 10.8.0.0/16, via: 10.0.0.2}
      - {dst: 10.8.1.0/24, via: 10.0.0.3}
  - name: p1
    device: d1
    ipv4: 192.168.1.1/24
    routes:
      - {dst: 172.16.0.0/12, via: 192.168.1.9}
)",
                                "t");
  EXPECT_TRUE(r.errors.empty());
  return *r.config;
}

TEST(Route, LongestPrefixWins) {
  Config c = two_ports();
  RouteTable t(c.ports);
  auto h = t.lookup(*Ipv4::parse("10.8.1.7"));
  ASSERT_TRUE(h);
  EXPECT_EQ(h->addr.str(), "10.0.0.3");
  EXPECT_EQ(h->route->kind(), "static");
  EXPECT_EQ(t.lookup(*Ipv4::parse("10.8.2.7"))->addr.str(), "10.0.0.2");
  auto connected = t.lookup(*Ipv4::parse("10.0.0.77"));
  EXPECT_EQ(connected->addr.str(), "10.0.0.77");
  EXPECT_EQ(connected->route->kind(), "connected");
  auto p1 = t.lookup(*Ipv4::parse("172.20.0.1"));
  EXPECT_EQ(p1->port, 1);
  EXPECT_EQ(p1->addr.str(), "192.168.1.9");
  auto def = t.lookup(*Ipv4::parse("8.8.8.8"));
  EXPECT_EQ(def->route->kind(), "default");
  EXPECT_EQ(def->addr.str(), "10.0.0.254");
  EXPECT_EQ(def->port, 0);
}

TEST(Route, NoDefaultMeansNoRoute) {
  Config c = two_ports();
  c.ports[0].gateway.reset();
  RouteTable t(c.ports);
  EXPECT_FALSE(t.lookup(*Ipv4::parse("8.8.8.8")));
}

TEST(Route, GatewaysAreListedOnce) {
  Config c = two_ports();
  c.ports[0].routes.push_back({*Ipv4Prefix::parse("10.9.0.0/16", false), *Ipv4::parse("10.0.0.2")});
  RouteTable t(c.ports);
  auto gws = t.gateways();
  ASSERT_EQ(gws.size(), 4u);  // .254, .2, .3 on p0 and .9 on p1
}

}  // namespace
}  // namespace cleave::dp
