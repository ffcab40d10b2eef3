-- title: Revenue by month
-- description: Paid revenue and order counts per month of one year.
-- source: shop
-- param: year int "Year" = 2025
-- sheet: Revenue
-- filename: revenue-{year}
-- column: month "Month" date(mmmm yyyy)
-- column: orders "Orders" int(#,##0)
-- column: items "Items sold" int(#,##0)
-- column: revenue "Revenue" number(#,##0.00)
-- column: average_order "Average order" number(#,##0.00)
SELECT strftime('%Y-%m-01', created_at) AS month,
       count(*) AS orders,
       sum(quantity) AS items,
       round(sum(total), 2) AS revenue,
       round(avg(total), 2) AS average_order
FROM orders
WHERE paid AND strftime('%Y', created_at) = printf('%04d', :year)
GROUP BY month
ORDER BY month;
