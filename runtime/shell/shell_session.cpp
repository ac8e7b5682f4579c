#include "runtime/shell/shell_session.hpp"

#include "messages/error_codes.hpp"
#include "runtime/io/clock.hpp"
#include "runtime/io/json_writer.hpp"
#include "runtime/io/text.hpp"
#include "runtime/shell/shell_names.hpp"

#include <caf/scoped_actor.hpp>
#include <caf/all.hpp>

#include <algorithm>
#include <sstream>
#include <thread>

namespace kbrl {

namespace {

std::string gpus_text(const std::vector<int32_t>& gpus) {
  std::vector<std::string> xs;
  for (auto g : gpus)
    xs.push_back(std::to_string(g));
  return xs.empty() ? "-" : join(xs, ",");
}

bool node_matches(const node_record& rec, const std::string& filter) {
  return filter.empty() || rec.info.name == filter;
}

void write_actor_status(json_writer& w, const actor_status& st) {
  w.begin_object()
    .field("name", st.name)
    .field("role", st.role)
    .field("node", st.node)
    .field("state", st.state)
    .field("health", to_string(st.health))
    .field("mailbox_size", st.mailbox_size)
    .field("messages_handled", st.messages_handled)
    .field("restarts", st.restarts)
    .field("last_error", st.last_error)
    .field("since_unix_ms", st.since_unix_ms);
  w.key("details").begin_object();
  for (auto& d : st.details)
    w.field(d.key, d.value);
  w.end_object();
  w.key("commands").begin_array();
  for (auto& c : st.commands)
    w.value(c);
  w.end_array();
  w.end_object();
}

} // namespace

std::vector<std::string> split_command_line(const std::string& line) {
  std::vector<std::string> words;
  std::string cur;
  bool quoted = false;
  bool have = false;
  for (char c : line) {
    if (c == '"') {
      quoted = !quoted;
      have = true;
    } else if (!quoted && std::isspace(static_cast<unsigned char>(c))) {
      if (have)
        words.push_back(cur);
      cur.clear();
      have = false;
    } else {
      cur += c;
      have = true;
    }
  }
  if (have)
    words.push_back(cur);
  return words;
}

std::string format_table(const std::vector<std::string>& header,
                         const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(header.size());
  for (size_t i = 0; i < header.size(); ++i)
    width[i] = header[i].size();
  for (auto& r : rows)
    for (size_t i = 0; i < r.size() && i < width.size(); ++i)
      width[i] = std::max(width[i], r[i].size());
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    std::string l;
    for (size_t i = 0; i < cells.size() && i < width.size(); ++i) {
      l += cells[i];
      if (i + 1 < cells.size() && i + 1 < width.size())
        l += std::string(width[i] - cells[i].size() + 2, ' ');
    }
    out += l + "\n";
  };
  line(header);
  for (auto& r : rows)
    line(r);
  return out;
}

std::string render_nodes(const membership_view& view, int64_t now_ms) {
  std::vector<std::vector<std::string>> rows;
  for (auto& n : view.nodes) {
    std::string since, note;
    int64_t t = n.state == node_state::up ? n.joined_unix_ms : n.down_unix_ms;
    since = format_time_of_day(t) + " (" + format_duration_ms(now_ms - t) + " ago)";
    if (n.state == node_state::up)
      note = "last heard " + format_duration_ms(now_ms - n.last_seen_unix_ms) + " ago";
    else
      note = n.down_reason;
    rows.push_back({n.info.name + (n.info.name == view.coordinator ? " *" : ""),
                    to_string(n.state), join(n.info.roles, ","), gpus_text(n.info.gpus),
                    n.info.host + ":" + std::to_string(n.info.port),
                    std::to_string(n.incarnation), since, note});
  }
  return "cluster " + view.cluster + " (coordinator " + view.coordinator + " marked *)\n"
         + format_table({"NODE", "STATE", "ROLES", "GPUS", "ADDRESS", "INCARNATION", "SINCE",
                         "NOTE"},
                        rows);
}

std::string render_nodes_json(const membership_view& view) {
  json_writer w;
  w.begin_object()
    .field("cluster", view.cluster)
    .field("coordinator", view.coordinator)
    .field("revision", view.revision);
  w.key("nodes").begin_array();
  for (auto& n : view.nodes) {
    w.begin_object()
      .field("name", n.info.name)
      .field("state", to_string(n.state))
      .field("host", n.info.host)
      .field("port", static_cast<uint32_t>(n.info.port))
      .field("pid", n.info.pid)
      .field("incarnation", n.incarnation)
      .field("joined_unix_ms", n.joined_unix_ms)
      .field("last_seen_unix_ms", n.last_seen_unix_ms)
      .field("down_unix_ms", n.down_unix_ms)
      .field("down_reason", n.down_reason)
      .field("devices", n.info.devices)
      .field("torch_version", n.info.torch_version);
    w.key("roles").begin_array();
    for (auto& r : n.info.roles)
      w.value(r);
    w.end_array();
    w.key("gpus").begin_array();
    for (auto g : n.info.gpus)
      w.value(g);
    w.end_array();
    w.key("actors").begin_array();
    for (auto& a : n.info.actors)
      w.value(a.name);
    w.end_array();
    w.end_object();
  }
  w.end_array().end_object();
  return w.str();
}

std::string render_actors(const membership_view& view, const std::string& node_filter) {
  std::vector<std::vector<std::string>> rows;
  for (auto& n : view.nodes)
    if (node_matches(n, node_filter))
      for (auto& a : n.info.actors)
        rows.push_back({a.name, a.role, n.info.name, to_string(n.state)});
  return format_table({"ACTOR", "ROLE", "NODE", "NODE STATE"}, rows);
}

std::string render_actors_json(const membership_view& view, const std::string& node_filter) {
  json_writer w;
  w.begin_array();
  for (auto& n : view.nodes)
    if (node_matches(n, node_filter))
      for (auto& a : n.info.actors)
        w.begin_object()
          .field("name", a.name)
          .field("role", a.role)
          .field("node", n.info.name)
          .field("node_state", to_string(n.state))
          .end_object();
  w.end_array();
  return w.str();
}

std::string render_status(const actor_status& st, int64_t now_ms) {
  std::vector<std::vector<std::string>> rows{
    {"actor", st.name},
    {"role", st.role},
    {"node", st.node},
    {"state", st.state},
    {"up since", format_time_of_day(st.since_unix_ms) + " ("
                   + format_duration_ms(now_ms - st.since_unix_ms) + ")"},
    {"mailbox", std::to_string(st.mailbox_size)},
    {"messages handled", std::to_string(st.messages_handled)},
    {"restarts", std::to_string(st.restarts)},
    {"last error", st.last_error.empty() ? "-" : st.last_error},
  };
  for (auto& d : st.details)
    rows.push_back({d.key, d.value});
  if (!st.commands.empty())
    rows.push_back({"commands", join(st.commands, ", ")});
  std::string out;
  size_t w = 0;
  for (auto& r : rows)
    w = std::max(w, r[0].size());
  for (auto& r : rows)
    out += r[0] + ":" + std::string(w - r[0].size() + 2, ' ') + r[1] + "\n";
  return out;
}

std::string render_status_json(const actor_status& st) {
  json_writer w;
  write_actor_status(w, st);
  return w.str();
}

shell_session::shell_session(caf::actor_system& sys, node_actor target,
                             std::chrono::milliseconds timeout)
  : sys_(sys), target_(std::move(target)), timeout_(timeout) {
}

std::string shell_session::help_text() {
  return "commands:\n"
         "  nodes                 every node of the cluster: state, roles, GPUs, since when\n"
         "  actors [NODE]         the actors of the cluster, or of one node\n"
         "  status ACTOR          an actor's state, mailbox, messages handled, restarts, last\n"
         "                        error and role details (ACTOR is node/role, e.g. head/learner,\n"
         "                        or only the role when one node has it: learner)\n"
         "  watch ACTOR [S] [N]   status every S seconds (default 1), N times (default: until\n"
         "                        Ctrl-C)\n"
         "  config [SECTION]      the run config of the node this shell is connected to, or one\n"
         "                        section of it (config learner)\n"
         "  VERB ACTOR [ARGS]     a control verb listed under 'commands' in the actor's status\n"
         "                        e.g. pause head/coordinator, resume head/coordinator,\n"
         "                        timeline head/coordinator [N] (per-stage timing of the last N\n"
         "                        steps), trajectory head/coordinator PROBLEM (the newest\n"
         "                        trajectory of a problem: prompt, completion, kernel, verdict,\n"
         "                        reward per turn)\n"
         "  help                  this text\n"
         "  quit                  leave the shell\n";
}

caf::expected<membership_view> shell_session::fetch_view() {
  caf::scoped_actor self{sys_};
  caf::expected<membership_view> result{caf::error{}};
  self->request(target_, timeout_, nodes_atom::value)
    .receive([&](membership_view& v) { result = std::move(v); },
             [&](caf::error& err) { result = std::move(err); });
  return result;
}

caf::expected<actor_status> shell_session::fetch_status(const std::string& actor) {
  caf::scoped_actor self{sys_};
  caf::expected<actor_status> result{caf::error{}};
  self->request(target_, timeout_, status_atom::value, actor)
    .receive([&](actor_status& st) { result = std::move(st); },
             [&](caf::error& err) { result = std::move(err); });
  return result;
}

bool shell_session::run(const std::string& line, bool json,
                        const std::function<void(const std::string&)>& print,
                        const std::atomic<bool>* interrupted) {
  last_failed_ = false;
  auto words = split_command_line(line);
  if (words.empty())
    return true;
  auto fail = [&](const std::string& what) {
    last_failed_ = true;
    if (json) {
      json_writer w;
      w.begin_object().field("error", what).end_object();
      print(w.str() + "\n");
    } else {
      print("error: " + what + "\n");
    }
    return true;
  };
  auto& cmd = words[0];
  // "coordinator" for "head/coordinator": a name without its node is looked up in the view.
  auto resolve = [&](const std::string& name) -> caf::expected<std::string> {
    if (name.find('/') != std::string::npos)
      return name;
    auto view = fetch_view();
    if (!view)
      return std::move(view.error());
    return resolve_actor_name(*view, name);
  };
  auto said = [&](const caf::error& err, const std::string& what) {
    return failure_text(err, sys_.render(err), timeout_, what);
  };
  if (cmd == "quit" || cmd == "exit")
    return false;
  if (cmd == "help") {
    print(help_text());
    return true;
  }
  if (cmd == "nodes" || cmd == "actors") {
    if (words.size() > (cmd == "nodes" ? 1u : 2u))
      return fail("usage: " + cmd + (cmd == "nodes" ? "" : " [NODE]"));
    auto view = fetch_view();
    if (!view)
      return fail(sys_.render(view.error()));
    std::string filter = words.size() > 1 ? words[1] : "";
    if (!filter.empty()
        && std::none_of(view->nodes.begin(), view->nodes.end(),
                        [&](const node_record& n) { return n.info.name == filter; }))
      return fail("no node named '" + filter + "'");
    if (cmd == "nodes")
      print(json ? render_nodes_json(*view) + "\n" : render_nodes(*view, now_unix_ms()));
    else
      print(json ? render_actors_json(*view, filter) + "\n" : render_actors(*view, filter));
    return true;
  }
  if (cmd == "status") {
    if (words.size() != 2)
      return fail("usage: status ACTOR (e.g. status head/learner, or status learner)");
    auto name = resolve(words[1]);
    if (!name)
      return fail(error_text(name.error()));
    auto st = fetch_status(*name);
    if (!st)
      return fail(said(st.error(), *name));
    print(json ? render_status_json(*st) + "\n" : render_status(*st, now_unix_ms()));
    return true;
  }
  if (cmd == "watch") {
    if (words.size() < 2 || words.size() > 4)
      return fail("usage: watch ACTOR [SECONDS] [COUNT]");
    double interval_s = 1;
    long count = 0;
    try {
      if (words.size() > 2)
        interval_s = std::stod(words[2]);
      if (words.size() > 3)
        count = std::stol(words[3]);
    } catch (const std::exception&) {
      return fail("usage: watch ACTOR [SECONDS] [COUNT]: SECONDS and COUNT are numbers");
    }
    if (interval_s <= 0 || count < 0)
      return fail("watch: SECONDS must be > 0 and COUNT >= 0");
    auto name = resolve(words[1]);
    if (!name)
      return fail(error_text(name.error()));
    for (long i = 0; count == 0 || i < count; ++i) {
      if (interrupted != nullptr && interrupted->load())
        break;
      auto st = fetch_status(*name);
      if (!st)
        return fail(said(st.error(), *name));
      if (json) {
        print(render_status_json(*st) + "\n");
      } else {
        if (count != 1)
          print("\x1b[2J\x1b[H"); // clear the screen: a refreshing view, not a scroll
        print(render_status(*st, now_unix_ms()));
        print("(every " + (words.size() > 2 ? words[2] : std::string{"1"})
              + " s; Ctrl-C stops)\n");
      }
      if (count != 0 && i + 1 == count)
        break;
      auto until = std::chrono::steady_clock::now()
                   + std::chrono::milliseconds(static_cast<int64_t>(interval_s * 1000));
      while (std::chrono::steady_clock::now() < until
             && !(interrupted != nullptr && interrupted->load()))
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return true;
  }
  if (cmd == "config") {
    if (words.size() > 2)
      return fail("usage: config [SECTION] (e.g. config learner)");
    caf::scoped_actor self{sys_};
    std::string text;
    caf::error err;
    self->request(target_, timeout_, config_atom::value)
      .receive([&](std::string& t) { text = std::move(t); }, [&](caf::error& e) { err = e; });
    if (err)
      return fail(said(err, "the node"));
    if (words.size() == 2) {
      auto section = toml_section(text, words[1]);
      if (!section)
        return fail("the run config has no [" + words[1] + "] section");
      text = std::move(*section);
    }
    if (json) {
      json_writer w;
      w.begin_object().field("config", text).end_object();
      print(w.str() + "\n");
    } else {
      print(text);
    }
    return true;
  }
  // Anything else is a control verb for an actor: VERB ACTOR [ARGS...].
  if (words.size() < 2)
    return fail("unknown command '" + cmd + "' (type help)");
  auto name = resolve(words[1]);
  if (!name)
    return fail(words[1].find('/') == std::string::npos
                  ? "unknown command '" + cmd + "' (type help), or " + error_text(name.error())
                  : error_text(name.error()));
  std::vector<std::string> args(words.begin() + 2, words.end());
  caf::scoped_actor self{sys_};
  std::string answer;
  caf::error err;
  self->request(target_, timeout_, control_atom::value, *name, cmd, args)
    .receive([&](std::string& a) { answer = std::move(a); }, [&](caf::error& e) { err = e; });
  if (err)
    return fail(said(err, *name));
  if (json) {
    json_writer w;
    w.begin_object().field("result", answer).end_object();
    print(w.str() + "\n");
  } else {
    print(answer + "\n");
  }
  return true;
}

} // namespace kbrl
